/**
 * Text the databases cannot store as sent: U+0000 (PostgreSQL's text refuses it) and a
 * UTF-16 surrogate without its pair (UTF-8 has no encoding for it).
 */
export const UNSTORABLE_TEXT = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * The path (`name`, `scopes[1]`) of the first string in a parsed JSON body, key or value,
 * holding U+0000; undefined when there is none. Checked before a request body reaches
 * the store, so it is a 400 rather than a database error. Walks with a stack of its own,
 * not by recursion, and names the path only once found: how deep a body nests is the
 * client's choice.
 */
export function fieldWithNul(body: unknown): string | undefined {
  // In document order: a node is checked, then its children from the first.
  const pending: PathNode[] = [{ value: body, step: '', parent: undefined }];
  for (let node = pending.pop(); node !== undefined; node = pending.pop()) {
    if (node.step.includes('\u0000')) return pathOf(node.parent);
    const { value } = node;
    if (typeof value === 'string') {
      if (value.includes('\u0000')) return pathOf(node);
      continue;
    }
    if (typeof value !== 'object' || value === null) continue;
    const children = Array.isArray(value)
      ? value.map((item: unknown, i) => ({ value: item, step: `[${i}]`, parent: node }))
      : Object.entries(value).map(([key, item]: [string, unknown]) => ({ value: item, step: `.${key}`, parent: node }));
    for (let i = children.length - 1; i >= 0; i--) pending.push(children[i]!);
  }
  return undefined;
}

interface PathNode {
  value: unknown;
  /** `.key` or `[index]`: the way here from the parent; '' at the top. */
  step: string;
  parent: PathNode | undefined;
}

/** `a.b[2].c`, or `body` for the top of the document. */
function pathOf(node: PathNode | undefined): string {
  const steps: string[] = [];
  for (let at = node; at !== undefined; at = at.parent) steps.push(at.step);
  const path = steps.reverse().join('');
  return (path.startsWith('.') ? path.slice(1) : path) || 'body';
}
