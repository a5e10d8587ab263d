import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { expect, test } from 'vitest';
import { ROOT } from './support/processes.js';

/**
 * The arrows between the service's modules point one way (STYLE.md; issues 17 and 34): no
 * module imports, directly or through others, a module that imports it, and none imports a
 * module of a layer above its own. Read from the sources' own import and export lines,
 * type-only ones included (a type cycle is a design cycle); the layers are also held to
 * what import() calls load, while a module loaded on demand may import the one that loads it.
 */

const SOURCES = join(ROOT, 'src');

function modules(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return modules(path);
    return path.endsWith('.ts') && !path.endsWith('.test.ts') ? [path] : [];
  });
}

/** The modules `file` imports: by its import and export lines, with its import() calls too when `calls`. */
function importsOf(file: string, { calls = false } = {}): string[] {
  const text = readFileSync(file, 'utf8');
  const lines = [...text.matchAll(/^\s*(?:import|export)\b[^'";]*?from\s+'(\.{1,2}\/[^']+)'/gm)];
  const loaded = calls ? [...text.matchAll(/\bimport\(\s*'(\.{1,2}\/[^']+)'\s*\)/g)] : [];
  return [...lines, ...loaded].map((match) => resolve(dirname(file), match[1]!.replace(/\.js$/, '.ts')));
}

/** Every cycle's modules, each cycle once (Tarjan's strongly connected components). */
function cycles(graph: Map<string, string[]>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, counter);
    low.set(node, counter);
    counter++;
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!graph.has(next)) continue;
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, index.get(next)!));
      }
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    for (;;) {
      const member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
      if (member === node) break;
    }
    const selfLoop = (graph.get(node) ?? []).includes(node);
    if (component.length > 1 || selfLoop) found.push(component.map((file) => relative(SOURCES, file)).sort());
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return found;
}

test('no module of src/ imports a module that imports it, directly or not', () => {
  const files = modules(SOURCES);
  expect(files.length).toBeGreaterThan(50);
  const graph = new Map(files.map((file) => [file, importsOf(file)]));
  // The reading works: app.ts imports the route modules it registers.
  expect(graph.get(join(SOURCES, 'app.ts'))).toContain(join(SOURCES, 'intake', 'routes.ts'));
  expect(cycles(graph)).toEqual([]);
});

/**
 * The layers of src/, bottom first. A module may import modules of its own layer and of
 * those below, never of one above. Each entry of src/ (a directory, with everything under
 * it, or a file) is placed here: a new one fails the test until it is given its layer.
 */
const LAYERS: ReadonlyArray<{ name: string; entries: readonly string[] }> = [
  // What every layer may use: the rules and data of the domain, the metric registry and
  // tracing, the error table, the logger, the configuration (with the secrets key it
  // names) and the HTTP server's limits.
  { name: 'ground floor', entries: ['domain/', 'telemetry/', 'errors.ts', 'logger.ts', 'config.ts', 'secrets.ts', 'http-hardening.ts'] },
  { name: 'store', entries: ['store/'] },
  { name: 'sources and destinations', entries: ['sources/', 'destinations/'] },
  // app-instance.ts is the app's Fastify type, which names intake's writer and the delivery
  // worker; intake's routes are the first modules to take it.
  { name: 'intake', entries: ['intake/', 'app-instance.ts'] },
  // Accounts, sessions and sign-in, which the services (invitations) and the API build on.
  { name: 'accounts', entries: ['admin/'] },
  { name: 'services', entries: ['services/'] },
  { name: 'routes', entries: ['api/', 'ops/'] },
  { name: 'app', entries: ['app.ts'] },
  { name: 'processes', entries: ['serve.ts', 'main.ts', 'cli/', 'reference/'] },
];

const LAYER_OF = new Map(LAYERS.flatMap(({ entries }, level) => entries.map((entry) => [entry, level] as const)));

/** The entry of src/ a module is placed by: its first directory, or its own name at the top. */
function entryOf(file: string): string {
  const [first, ...rest] = relative(SOURCES, file).split(sep);
  return rest.length > 0 ? `${first}/` : first!;
}

test('every directory and file of src/ has a layer, and every layer entry is in src/', () => {
  const entries = new Set(modules(SOURCES).map(entryOf));
  expect([...entries].filter((entry) => !LAYER_OF.has(entry))).toEqual([]);
  expect([...LAYER_OF.keys()].filter((entry) => !entries.has(entry))).toEqual([]);
});

test('no module of src/ imports a module of a layer above its own', () => {
  const layerOf = (file: string) => LAYER_OF.get(entryOf(file)) ?? LAYERS.length;
  const described = (file: string) => `${relative(SOURCES, file)} (${LAYERS[layerOf(file)]?.name ?? 'no layer'})`;
  const upward = modules(SOURCES).flatMap((file) =>
    importsOf(file, { calls: true })
      .filter((target) => layerOf(target) > layerOf(file))
      .map((target) => `${described(file)} imports ${described(target)}`),
  );
  expect(upward).toEqual([]);
});
