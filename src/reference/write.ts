import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { referencePages } from './render.js';

/**
 * `npm run docs`: writes the generated references (src/reference/render.ts) into docs/.
 * With `--check`, writes nothing and exits 1 naming each page that is out of date.
 */
const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const check = process.argv.includes('--check');
const stale: string[] = [];
for (const page of referencePages()) {
  const file = join(root, page.path);
  let current: string | undefined;
  try {
    current = readFileSync(file, 'utf8');
  } catch {
    current = undefined;
  }
  if (current === page.text) continue;
  stale.push(page.path);
  if (!check) {
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, page.text);
  }
}
if (check && stale.length > 0) {
  process.stderr.write(`out of date (run npm run docs): ${stale.join(', ')}\n`);
  process.exit(1);
}
process.stdout.write(stale.length === 0 ? 'references up to date\n' : `wrote ${stale.join(', ')}\n`);
