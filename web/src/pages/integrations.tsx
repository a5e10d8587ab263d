import { PageHeader } from '../components/ui';

export function IntegrationsPage() {
  return <PageHeader title="integrations" />;
}
