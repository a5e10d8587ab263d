import { useState, type ReactNode } from 'react';
import '../pages/logs.css';

/**
 * A JSON document as a collapsible tree. Everything is rendered as React text: keys,
 * strings (quoted, escaped as JSON), numbers, booleans and null, each coloured by class.
 * Objects and arrays fold with ▸/▾ buttons; long ones show their first items and a button
 * for more, so a large payload stays responsive.
 */

const CHILDREN_PAGE = 100;
const LONG_STRING = 2000;

export function JsonView({ value, expandDepth = 4, label = 'JSON' }: { value: unknown; expandDepth?: number; label?: string }) {
  const [mode, setMode] = useState({ depth: expandDepth, generation: 0 });
  const foldable = isContainer(value);
  return (
    <div className="json-view">
      {foldable && (
        <div className="json-toolbar">
          <button type="button" className="button small" onClick={() => setMode((m) => ({ depth: Infinity, generation: m.generation + 1 }))}>
            Expand all
          </button>
          <button type="button" className="button small" onClick={() => setMode((m) => ({ depth: 1, generation: m.generation + 1 }))}>
            Collapse all
          </button>
        </div>
      )}
      <div className="json-tree" role="group" aria-label={label} key={mode.generation}>
        <JsonNode value={value} depth={0} expandDepth={mode.depth} last />
      </div>
    </div>
  );
}

function isContainer(value: unknown): value is Record<string, unknown> | unknown[] {
  return typeof value === 'object' && value !== null;
}

/** A key as written: bare when it is a plain word, quoted (JSON-escaped) otherwise. */
function keyText(name: string): string {
  return /^[\p{L}\p{N}_$@.:-]+$/u.test(name) ? name : JSON.stringify(name);
}

function JsonNode({
  name,
  value,
  depth,
  expandDepth,
  last,
}: {
  name?: string;
  value: unknown;
  depth: number;
  expandDepth: number;
  last: boolean;
}) {
  const comma = last ? '' : ',';
  const keyPart =
    name === undefined ? null : (
      <>
        <span className="json-key">{keyText(name)}</span>
        <span className="json-punct">: </span>
      </>
    );

  if (!isContainer(value)) {
    return (
      <div className="json-line">
        {keyPart}
        <JsonPrimitive value={value} />
        <span className="json-punct">{comma}</span>
      </div>
    );
  }
  return <JsonContainer keyPart={keyPart} name={name} value={value} depth={depth} expandDepth={expandDepth} comma={comma} />;
}

function JsonContainer({
  keyPart,
  name,
  value,
  depth,
  expandDepth,
  comma,
}: {
  keyPart: ReactNode;
  name: string | undefined;
  value: Record<string, unknown> | unknown[];
  depth: number;
  expandDepth: number;
  comma: string;
}) {
  const [open, setOpen] = useState(depth < expandDepth);
  const [shown, setShown] = useState(CHILDREN_PAGE);
  const array = Array.isArray(value);
  const entries: [string | undefined, unknown][] = array ? value.map((item) => [undefined, item]) : Object.entries(value);
  const [opening, closing] = array ? ['[', ']'] : ['{', '}'];
  const count = entries.length;
  const summary = array ? `${count} item${count === 1 ? '' : 's'}` : `${count} key${count === 1 ? '' : 's'}`;

  if (count === 0) {
    return (
      <div className="json-line">
        {keyPart}
        <span className="json-punct">
          {opening}
          {closing}
          {comma}
        </span>
      </div>
    );
  }
  const toggle = (
    <button
      type="button"
      className="json-toggle"
      aria-expanded={open}
      aria-label={`${open ? 'Collapse' : 'Expand'} ${name === undefined ? (depth === 0 ? 'document' : 'item') : name}`}
      onClick={() => setOpen((o) => !o)}
    >
      {open ? '▾' : '▸'}
    </button>
  );
  if (!open) {
    return (
      <div className="json-line">
        {toggle}
        {keyPart}
        <span className="json-punct">{opening}</span>
        <span className="json-summary">…{summary}</span>
        <span className="json-punct">
          {closing}
          {comma}
        </span>
      </div>
    );
  }
  return (
    <div className="json-node">
      <div className="json-line">
        {toggle}
        {keyPart}
        <span className="json-punct">{opening}</span>
      </div>
      <div className="json-children">
        {entries.slice(0, shown).map(([key, child], index) => (
          <JsonNode
            key={key ?? index}
            name={key}
            value={child}
            depth={depth + 1}
            expandDepth={expandDepth}
            last={index === count - 1}
          />
        ))}
        {count > shown && (
          <div className="json-line">
            <button type="button" className="button small" onClick={() => setShown((n) => n + CHILDREN_PAGE)}>
              Show {Math.min(CHILDREN_PAGE, count - shown)} more of {count - shown}
            </button>
          </div>
        )}
      </div>
      <div className="json-line">
        <span className="json-punct">
          {closing}
          {comma}
        </span>
      </div>
    </div>
  );
}

function JsonPrimitive({ value }: { value: unknown }) {
  const [whole, setWhole] = useState(false);
  if (typeof value === 'string') {
    const text = JSON.stringify(value);
    if (text.length > LONG_STRING && !whole) {
      return (
        <>
          <span className="json-string">{text.slice(0, LONG_STRING)}…</span>{' '}
          <button type="button" className="button small" onClick={() => setWhole(true)}>
            Show all {text.length} characters
          </button>
        </>
      );
    }
    return <span className="json-string">{text}</span>;
  }
  if (typeof value === 'number') return <span className="json-number">{String(value)}</span>;
  if (typeof value === 'boolean') return <span className="json-boolean">{String(value)}</span>;
  if (value === null) return <span className="json-null">null</span>;
  return <span className="json-null">{String(value)}</span>;
}
