import { PageHeader } from '../components/ui';

export function AuditLogPage() {
  return <PageHeader title="audit-log" />;
}
