import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { ConfigSchema } from '../src/config.js';
import { ERRORS } from '../src/errors.js';
import { referencePages } from '../src/reference/render.js';
import { ROOT } from './support/processes.js';

/**
 * The configuration, CLI and error-code references are rendered from the code
 * (src/reference/render.ts); a change to the code that is not followed by `npm run docs`
 * fails here, naming the page.
 */

const pages = referencePages();
const committed = (path: string) => readFileSync(join(ROOT, path), 'utf8');

test.each(pages.map((page) => [page.path, page]))('the committed %s is what the code renders', (path, page) => {
  expect(committed(path), `${path} is out of date: run npm run docs`).toBe(page.text);
});

test('every variable, command option and error code has its row, with a meaning', () => {
  const [configuration, cli, errors] = pages.map((page) => page.text);
  for (const [name, schema] of Object.entries(ConfigSchema.properties)) {
    expect(configuration).toContain(`| \`${name}\` |`);
    expect((schema as { description?: string }).description, `${name} has no description`).toBeTruthy();
  }
  for (const line of ['## intake integration create', '| `--company <id>` |', '## intake destination replay']) {
    expect(cli).toContain(line);
  }
  for (const [code, error] of Object.entries(ERRORS)) expect(errors).toContain(`| \`${code}\` | ${error.status} |`);
});
