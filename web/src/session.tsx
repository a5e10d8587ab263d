import { createContext, useCallback, useContext, useEffect, useMemo, useState, type ReactNode } from 'react';
import { api, ApiError, connection } from './api/client';
import type { Role, Session } from './api/types';

/** What a role may do, as the API decides it (docs/api.md, "Permissions"); the panel only hides. */
export type Permission =
  | 'integrations:read'
  | 'integrations:manage'
  | 'logs:read'
  | 'members:read'
  | 'members:manage'
  | 'company:manage'
  | 'data:erase';

const ROLE_PERMISSIONS: Record<Role, readonly Permission[]> = {
  viewer: ['integrations:read', 'logs:read', 'members:read'],
  admin: ['integrations:read', 'integrations:manage', 'logs:read', 'members:read'],
  owner: ['integrations:read', 'integrations:manage', 'logs:read', 'members:read', 'members:manage', 'company:manage', 'data:erase'],
};

const COMPANY_STORAGE_KEY = 'intake.companyId';

type SessionState =
  | { status: 'loading' }
  /** `notice`: why, when the session just ended, for the sign-in page to say. */
  | { status: 'signed-out'; notice?: string }
  | { status: 'failed'; error: ApiError }
  | { status: 'signed-in'; session: Session };

export interface SignedIn {
  session: Session;
  company: Session['companies'][number] | undefined;
  role: Role | undefined;
  can(permission: Permission): boolean;
  /** The chosen company requires two-factor sign-in and the user has not turned it on. */
  twoFactorSetupRequired: boolean;
  switchCompany(companyId: string): void;
  signOut(everywhere?: boolean): Promise<void>;
}

interface SessionContextValue {
  state: SessionState;
  signedIn: SignedIn | undefined;
  /** After sign-in, setup or accepting an invitation: the API answered with the new session. */
  start(session: Session, chooseCompanyId?: string): void;
  reload(): void;
  /** The session ended without the panel signing out (a password reset ends them all). */
  forget(): void;
}

const SessionContext = createContext<SessionContextValue | undefined>(undefined);

/** Loads who is signed in, keeps the chosen company, and hands both to the API client. */
export function SessionProvider({ children }: { children: ReactNode }) {
  const [state, setState] = useState<SessionState>({ status: 'loading' });
  const [companyId, setCompanyId] = useState<string | undefined>(() => localStorage.getItem(COMPANY_STORAGE_KEY) ?? undefined);

  const choose = useCallback((id: string) => {
    localStorage.setItem(COMPANY_STORAGE_KEY, id);
    setCompanyId(id);
  }, []);

  const start = useCallback(
    (session: Session, chooseCompanyId?: string) => {
      connection.csrfToken = session.csrf_token;
      if (chooseCompanyId) choose(chooseCompanyId);
      setState({ status: 'signed-in', session });
    },
    [choose],
  );

  const reload = useCallback(() => {
    api
      .get<Session>('/auth/session')
      .then(start)
      .catch((error: ApiError) => setState(error.status === 401 ? { status: 'signed-out' } : { status: 'failed', error }));
  }, [start]);

  const forget = useCallback(() => {
    connection.csrfToken = undefined;
    setState({ status: 'signed-out' });
  }, []);

  useEffect(() => {
    // A request refused for want of a session: it ended elsewhere (signed out everywhere,
    // the password reset, the session expired). Said only when one was open here.
    connection.onSignedOut = () =>
      setState((previous) =>
        previous.status === 'signed-in'
          ? { status: 'signed-out', notice: 'Your session has ended. Sign in again to go on.' }
          : previous.status === 'signed-out'
            ? previous
            : { status: 'signed-out' },
      );
    connection.onTwoFactorSetupRequired = reload;
    reload();
  }, [reload]);

  const signedIn = useMemo<SignedIn | undefined>(() => {
    if (state.status !== 'signed-in') return undefined;
    const { session } = state;
    const company = session.companies.find((c) => c.id === companyId) ?? session.companies[0];
    // Set here, during render, not in an effect: the pages' own effects (their first
    // requests) run before this provider's effects would, and must already name the company.
    connection.companyId = company?.id;
    const role = company?.role;
    return {
      session,
      company,
      role,
      can: (permission) => role !== undefined && ROLE_PERMISSIONS[role].includes(permission),
      twoFactorSetupRequired: company?.requires_two_factor === true && !session.user.two_factor_enabled,
      switchCompany: choose,
      signOut: async (everywhere = false) => {
        await api.post(everywhere ? '/auth/logout-everywhere' : '/auth/logout');
        connection.csrfToken = undefined;
        setState({
          status: 'signed-out',
          notice: everywhere ? 'You are signed out, here and on every other device.' : 'You are signed out.',
        });
      },
    };
  }, [state, companyId, choose]);

  const value = useMemo(() => ({ state, signedIn, start, reload, forget }), [state, signedIn, start, reload, forget]);
  return <SessionContext.Provider value={value}>{children}</SessionContext.Provider>;
}

export function useSessionState(): SessionContextValue {
  const value = useContext(SessionContext);
  if (!value) throw new Error('useSessionState outside SessionProvider');
  return value;
}

/** The signed-in user, their company and role: only inside the signed-in layout. */
export function useSession(): SignedIn {
  const { signedIn } = useSessionState();
  if (!signedIn) throw new Error('useSession outside the signed-in layout');
  return signedIn;
}
