import { PageHeader } from '../components/ui';

export function LoginPage() {
  return <PageHeader title="login" />;
}
