import { PageHeader } from '../components/ui';

export function ManagementKeysPage() {
  return <PageHeader title="management-keys" />;
}
