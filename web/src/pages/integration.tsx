import { PageHeader } from '../components/ui';

export function IntegrationPage() {
  return <PageHeader title="integration" />;
}
