/**
 * Text the databases cannot store as sent: U+0000 (PostgreSQL's text refuses it) and a
 * UTF-16 surrogate without its pair (UTF-8 has no encoding for it).
 */
export const UNSTORABLE_TEXT = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * The path (`name`, `scopes[1]`) of the first string in a parsed JSON body, key or value,
 * holding U+0000; undefined when there is none. Checked before a request body reaches
 * the store, so it is a 400 rather than a database error.
 */
export function fieldWithNul(value: unknown, path = ''): string | undefined {
  if (typeof value === 'string') return value.includes('\u0000') ? path || 'body' : undefined;
  if (typeof value !== 'object' || value === null) return undefined;
  const entries = Array.isArray(value) ? value.map((item, i) => [`${path}[${i}]`, item] as const) : Object.entries(value).map(([key, item]) => [path ? `${path}.${key}` : key, item] as const);
  for (const [name, item] of entries) {
    if (name.includes('\u0000')) return path || 'body';
    const found = fieldWithNul(item, name);
    if (found !== undefined) return found;
  }
  return undefined;
}
