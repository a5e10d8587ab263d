import { BrowserRouter, Navigate, Route, Routes, useLocation } from 'react-router';
import { Layout } from './components/layout';
import { ErrorMessage, Loading } from './components/ui';
import { AccountPage } from './pages/account';
import { AuditLogPage } from './pages/audit-log';
import { CliLoginPage } from './pages/cli-login';
import { DestinationPage } from './pages/destination';
import { DestinationsPage } from './pages/destinations';
import { IntegrationPage } from './pages/integration';
import { IntegrationsPage } from './pages/integrations';
import { InvitePage } from './pages/invite';
import { LoginPage, type LoginNotice } from './pages/login';
import { ManagementKeysPage } from './pages/management-keys';
import { PageNotFound } from './pages/not-found';
import { MembersPage } from './pages/members';
import { PersonalDataPage } from './pages/personal-data';
import { ForgotPasswordPage, ResetPasswordPage } from './pages/password-reset';
import { RequestsPage } from './pages/requests';
import { SettingsPage } from './pages/settings';
import { SetupPage } from './pages/setup';
import { UsagePage } from './pages/usage';
import { WebhooksPage } from './pages/webhooks';
import { SessionProvider, useSessionState } from './session';

/** The panel lives under /admin; the server answers index.html for every path below it. */
export function App() {
  return (
    <BrowserRouter basename="/admin">
      <SessionProvider>
        <Routes>
          <Route path="/setup" element={<SetupPage />} />
          <Route path="/login" element={<LoginPage />} />
          <Route path="/invite" element={<InvitePage />} />
          <Route path="/forgot-password" element={<ForgotPasswordPage />} />
          <Route path="/reset-password" element={<ResetPasswordPage />} />
          <Route path="/*" element={<SignedInRoutes />} />
        </Routes>
      </SessionProvider>
    </BrowserRouter>
  );
}

function SignedInRoutes() {
  const { state, reload } = useSessionState();
  const location = useLocation();
  if (state.status === 'loading') return <Loading />;
  if (state.status === 'failed') return <ErrorMessage error={state.error} retry={reload} />;
  if (state.status === 'signed-out') {
    const next = location.pathname + location.search;
    const notice: LoginNotice | undefined = state.notice === undefined ? undefined : { notice: state.notice };
    return <Navigate to={`/login${next === '/' ? '' : `?next=${encodeURIComponent(next)}`}`} state={notice} replace />;
  }
  return (
    <Routes>
      <Route path="cli-login" element={<CliLoginPage />} />
      <Route element={<Layout />}>
        <Route index element={<Navigate to="/integrations" replace />} />
        <Route path="integrations" element={<IntegrationsPage />} />
        <Route path="integrations/:integrationId" element={<IntegrationPage />} />
        <Route path="destinations" element={<DestinationsPage />} />
        <Route path="destinations/:destinationId" element={<DestinationPage />} />
        <Route path="webhooks" element={<WebhooksPage />} />
        <Route path="requests" element={<RequestsPage />} />
        <Route path="usage" element={<UsagePage />} />
        <Route path="members" element={<MembersPage />} />
        <Route path="management-keys" element={<ManagementKeysPage />} />
        <Route path="audit-log" element={<AuditLogPage />} />
        <Route path="personal-data" element={<PersonalDataPage />} />
        <Route path="settings" element={<SettingsPage />} />
        <Route path="account" element={<AccountPage />} />
        <Route path="*" element={<PageNotFound />} />
      </Route>
    </Routes>
  );
}
