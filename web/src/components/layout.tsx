import { useEffect, useState } from 'react';
import { Navigate, NavLink, Outlet, useLocation, useMatch } from 'react-router';
import { useSession, type Permission } from '../session';

const NAV: { to: string; label: string; needs: Permission }[] = [
  { to: '/integrations', label: 'Integrations', needs: 'integrations:read' },
  { to: '/destinations', label: 'Destinations', needs: 'integrations:read' },
  { to: '/webhooks', label: 'Webhooks', needs: 'logs:read' },
  { to: '/requests', label: 'Requests', needs: 'logs:read' },
  { to: '/usage', label: 'Usage', needs: 'logs:read' },
  { to: '/members', label: 'Members', needs: 'members:read' },
  { to: '/management-keys', label: 'Management keys', needs: 'members:manage' },
  { to: '/audit-log', label: 'Audit log', needs: 'logs:read' },
  { to: '/personal-data', label: 'Personal data', needs: 'data:erase' },
  { to: '/settings', label: 'Settings', needs: 'members:read' },
];

const ENVIRONMENT_LABELS: Record<string, string> = { production: 'Production', staging: 'Staging', development: 'Development' };

/**
 * The frame of every signed-in page: navigation, company switcher, environment, account.
 * When the chosen company requires two-factor sign-in and the user has not turned it on,
 * a banner says so and every page but Account sends them there (the API refuses the
 * company's routes with 403 anyway).
 */
export function Layout() {
  const { session, company, role, can, twoFactorSetupRequired, switchCompany, signOut } = useSession();
  const onAccount = useMatch('/account') !== null;
  const environment = session.environment;
  // On a phone the navigation folds behind a Menu button (CSS shows the button below 760 px
  // only), so the sidebar does not take the top of every page; a page chosen closes it.
  const [menuOpen, setMenuOpen] = useState(false);
  const { pathname } = useLocation();
  useEffect(() => setMenuOpen(false), [pathname]);
  return (
    <div className={`shell env-${environment}`}>
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <div className="env-strip" role="note">
        <strong>{ENVIRONMENT_LABELS[environment] ?? environment}</strong>
        {environment === 'production' ? ' — changes here affect live traffic.' : ' environment'}
      </div>
      <aside className="sidebar">
        <div className="sidebar-top">
          <div className="brand">intake</div>
          {session.companies.length > 1 ? (
            <label className="company-switcher">
              <span className="visually-hidden">Company</span>
              <select value={company?.id} onChange={(event) => switchCompany(event.target.value)}>
                {session.companies.map((c) => (
                  <option key={c.id} value={c.id}>
                    {c.name}
                  </option>
                ))}
              </select>
            </label>
          ) : (
            <div className="company-name">{company?.name ?? 'No company'}</div>
          )}
          <button
            type="button"
            className="button small menu-button"
            aria-expanded={menuOpen}
            aria-controls="sidebar-menu"
            onClick={() => setMenuOpen((open) => !open)}
          >
            {menuOpen ? 'Close menu' : 'Menu'}
          </button>
        </div>
        <div id="sidebar-menu" className={menuOpen ? 'sidebar-menu open' : 'sidebar-menu'}>
          <nav aria-label="Main">
            {NAV.filter((item) => can(item.needs)).map((item) => (
              <NavLink key={item.to} to={item.to}>
                {item.label}
              </NavLink>
            ))}
          </nav>
          <div className="account">
            <div className="account-email" title={session.user.email}>
              {session.user.email}
            </div>
            <div className="muted small">{role ?? 'no role'}</div>
            <NavLink className="button ghost small" to="/account">
              Account
            </NavLink>
            <button type="button" className="button ghost small" onClick={() => void signOut()}>
              Sign out
            </button>
            <button type="button" className="button ghost small" onClick={() => void signOut(true)}>
              Sign out everywhere
            </button>
          </div>
        </div>
      </aside>
      <main id="main" className="content" tabIndex={-1}>
        {twoFactorSetupRequired && company && (
          <p className="notice two-factor-banner" role="alert">
            <strong>{company.name} requires two-factor sign-in.</strong> Set it up below to use the company
            {session.companies.length > 1 ? '; your other companies are in the company menu.' : '.'}
          </p>
        )}
        {onAccount ? (
          <Outlet />
        ) : twoFactorSetupRequired ? (
          <Navigate to="/account" replace />
        ) : company ? (
          // Keyed by company: switching companies starts every page afresh.
          <div key={company.id}>
            <Outlet />
          </div>
        ) : (
          <p>You are not a member of any company. Ask an owner to invite you.</p>
        )}
      </main>
    </div>
  );
}
