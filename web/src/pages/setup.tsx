import { PageHeader } from '../components/ui';

export function SetupPage() {
  return <PageHeader title="setup" />;
}
