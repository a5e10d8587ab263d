import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { expect, test } from 'vitest';
import { ROOT } from './support/processes.js';

/**
 * The arrows between the service's modules point one way (STYLE.md; issue 17): no module
 * imports, directly or through others, a module that imports it. Read from the sources'
 * own import and export lines, type-only ones included (a type cycle is a design cycle).
 */

const SOURCES = join(ROOT, 'src');

function modules(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return modules(path);
    return path.endsWith('.ts') && !path.endsWith('.test.ts') ? [path] : [];
  });
}

function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/^\s*(?:import|export)\b[^'";]*?from\s+'(\.{1,2}\/[^']+)'/gm)].map((match) =>
    resolve(dirname(file), match[1]!.replace(/\.js$/, '.ts')),
  );
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
