import { PageHeader } from '../components/ui';

export function WebhooksPage() {
  return <PageHeader title="webhooks" />;
}
