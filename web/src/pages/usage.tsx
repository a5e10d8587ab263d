import { PageHeader } from '../components/ui';

export function UsagePage() {
  return <PageHeader title="usage" />;
}
