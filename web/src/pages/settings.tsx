import { PageHeader } from '../components/ui';

export function SettingsPage() {
  return <PageHeader title="settings" />;
}
