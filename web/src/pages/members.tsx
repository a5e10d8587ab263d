import { PageHeader } from '../components/ui';

export function MembersPage() {
  return <PageHeader title="members" />;
}
