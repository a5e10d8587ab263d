// `node scripts/check-doc-links.mjs [FILE.md …]`: every relative link and anchor in the
// docs resolves. By default it reads README.md, CONTRIBUTING.md and every .md under docs/;
// a link must name a file or directory of the checkout, and a `#fragment` into a Markdown
// file must be one of that file's headings as GitHub makes their anchors. Prints each broken
// link as `file:line: target (why)` and exits 1, or one line saying all resolved.
// Links to other sites (any `scheme:`) are not fetched: the check must run without a network.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The Markdown files under a directory, at any depth. */
function markdownUnder(directory) {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return markdownUnder(path);
    return entry.name.endsWith('.md') ? [path] : [];
  });
}

const defaults = ['README.md', 'CONTRIBUTING.md'].map((name) => join(root, name)).filter((path) => existsSync(path));
const files = process.argv.length > 2 ? process.argv.slice(2).map((path) => resolve(path)) : [...defaults, ...markdownUnder(join(root, 'docs'))];

/**
 * The lines of a Markdown file with fenced code blocks blanked, so that a `# comment` in a
 * shell example is not taken for a heading nor a `[x](y)` in code for a link.
 */
function proseLines(text) {
  let fence = null;
  return text.split('\n').map((line) => {
    const marker = /^\s{0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence === null && marker) {
      fence = marker;
      return '';
    }
    if (fence !== null) {
      if (marker && marker[0] === fence[0] && marker.length >= fence.length) fence = null;
      return '';
    }
    return line;
  });
}

/** GitHub's anchor for a heading's text (github-slugger): lower case, punctuation dropped, each space a '-'. */
function slug(headingText) {
  const rendered = headingText
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .replace(/[`*]/g, '');
  return rendered.trim().toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
}

const anchorCache = new Map();

/** The anchors a Markdown file's headings (and any `<a id|name="…">`) give, duplicates numbered as GitHub does. */
function anchorsOf(path) {
  if (anchorCache.has(path)) return anchorCache.get(path);
  const anchors = new Set();
  const seen = new Map();
  for (const line of proseLines(readFileSync(path, 'utf8'))) {
    const heading = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      const base = slug(heading[1]);
      const count = seen.get(base) ?? 0;
      seen.set(base, count + 1);
      anchors.add(count === 0 ? base : `${base}-${count}`);
    }
    for (const html of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(html[1]);
  }
  anchorCache.set(path, anchors);
  return anchors;
}

/** Each link target of a line of prose, code spans left out: inline links, images and reference definitions. */
function targetsOf(line) {
  const prose = line.replace(/`[^`]*`/g, '');
  const inline = [...prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((match) => match[1]);
  const definition = /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(prose)?.[1];
  return definition ? [...inline, definition] : inline;
}

/** Why a link from `file` to `target` does not resolve, or null when it does. */
function problem(file, target) {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return null;
  if (target.startsWith('/')) return 'an absolute path: not a file of the checkout on GitHub';
  const hash = target.indexOf('#');
  const pathPart = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
  const fragment = hash === -1 ? null : decodeURIComponent(target.slice(hash + 1));
  const destination = pathPart === '' ? file : resolve(dirname(file), pathPart);
  if (!existsSync(destination)) return 'no such file';
  if (fragment === null || fragment === '') return null;
  if (!destination.endsWith('.md') || statSync(destination).isDirectory()) return null;
  return anchorsOf(destination).has(fragment) ? null : `no heading gives #${fragment} in ${relative(root, destination)}`;
}

const broken = [];
let checked = 0;
for (const file of files) {
  proseLines(readFileSync(file, 'utf8')).forEach((line, index) => {
    for (const target of targetsOf(line)) {
      checked += 1;
      const why = problem(file, target);
      if (why) broken.push(`${relative(root, file)}:${index + 1}: ${target} (${why})`);
    }
  });
}

if (broken.length > 0) {
  console.error(`${broken.length} broken of ${checked} links in ${files.length} files:`);
  for (const line of broken) console.error(`  ${line}`);
  process.exit(1);
}
console.log(`${checked} links in ${files.length} files: all resolve.`);
