/**
 * The state before and after an audited change, field by field, changed fields
 * highlighted; and the whole JSON of both. Values are JSON text in <pre>, never HTML.
 */

type Kind = 'changed' | 'added' | 'removed' | 'same';

interface FieldChange {
  name: string;
  kind: Kind;
  before: unknown;
  after: unknown;
  hasBefore: boolean;
  hasAfter: boolean;
}

const KIND_LABELS: Record<Kind, string> = { changed: 'changed', added: 'added', removed: 'removed', same: '' };

export function AuditChange({ before, after }: { before: unknown; after: unknown }) {
  if (before === null && after === null) {
    return <p className="muted audit-no-state">No state was recorded for this change: the action says what was done.</p>;
  }
  const fields = fieldChanges(before, after);
  return (
    <div className="audit-change">
      {fields ? (
        <div className="table-wrap">
          <table className="audit-diff" aria-label="Changes">
            <thead>
              <tr>
                <th scope="col">Field</th>
                <th scope="col">Before{before === null && <span className="muted"> (did not exist)</span>}</th>
                <th scope="col">After{after === null && <span className="muted"> (gone)</span>}</th>
              </tr>
            </thead>
            <tbody>
              {fields.map((field) => (
                <tr key={field.name} className={field.kind === 'same' ? 'audit-same' : `audit-${field.kind}`} data-field={field.name}>
                  <th scope="row">
                    <span className="mono">{field.name}</span>
                    {field.kind !== 'same' && (
                      <span className={`audit-kind audit-kind-${field.kind}`}> {KIND_LABELS[field.kind]}</span>
                    )}
                  </th>
                  <td className="wrap">
                    <Value present={field.hasBefore} value={field.before} name={field.name} />
                  </td>
                  <td className="wrap">
                    <Value present={field.hasAfter} value={field.after} name={field.name} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : (
        <div className="grid-2">
          <Whole title="Before" value={before} />
          <Whole title="After" value={after} />
        </div>
      )}
      {fields && (
        <details className="audit-raw">
          <summary>Whole JSON</summary>
          <div className="grid-2">
            <Whole title="Before" value={before} />
            <Whole title="After" value={after} />
          </div>
        </details>
      )}
    </div>
  );
}

function Value({ present, value, name }: { present: boolean; value: unknown; name: string }) {
  if (!present) return <span className="muted">—</span>;
  const time = timeHint(name, value);
  return (
    <>
      <pre className="audit-value">{json(value)}</pre>
      {time && <div className="muted small">{time}</div>}
    </>
  );
}

function Whole({ title, value }: { title: string; value: unknown }) {
  return (
    <div>
      <h4 className="audit-whole-title">{title}</h4>
      {value === null ? <p className="muted">null</p> : <pre className="audit-json">{json(value)}</pre>}
    </div>
  );
}

/** Both sides as objects → one row per field; otherwise undefined (shown whole). */
export function fieldChanges(before: unknown, after: unknown): FieldChange[] | undefined {
  const b = before === null ? {} : before;
  const a = after === null ? {} : after;
  if (!isObject(b) || !isObject(a)) return undefined;
  const names = [...Object.keys(b), ...Object.keys(a).filter((name) => !Object.hasOwn(b, name))];
  if (names.length === 0) return undefined;
  return names.map((name) => {
    const hasBefore = Object.hasOwn(b, name);
    const hasAfter = Object.hasOwn(a, name);
    const kind: Kind = !hasBefore ? 'added' : !hasAfter ? 'removed' : json(b[name]) === json(a[name]) ? 'same' : 'changed';
    return { name, kind, before: b[name], after: a[name], hasBefore, hasAfter };
  });
}

function json(value: unknown): string {
  return value === undefined ? 'undefined' : JSON.stringify(value, null, 2);
}

/** Times the store keeps as milliseconds (createdAt, revokedAt, …), also in words. */
function timeHint(name: string, value: unknown): string | undefined {
  if (!/At$/.test(name) || typeof value !== 'number' || value < 1e11 || value > 1e14) return undefined;
  return new Date(value).toISOString();
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
