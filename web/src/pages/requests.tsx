import { PageHeader } from '../components/ui';

export function RequestsPage() {
  return <PageHeader title="requests" />;
}
