import { Link, useLocation } from 'react-router';
import { NotFound } from '../components/ui';

/** A path of the panel that names no page: what happened, and the way back. */
export function PageNotFound() {
  const location = useLocation();
  return (
    <NotFound
      title="Page not found"
      actions={
        <Link className="button primary" to="/integrations">
          Go to integrations
        </Link>
      }
    >
      There is no page at <code>/admin{location.pathname}</code>. The link may be mistyped or out of date; the menu has every
      page of the panel.
    </NotFound>
  );
}
