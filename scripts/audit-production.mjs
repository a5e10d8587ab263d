// `npm run audit`: npm audit of the production dependencies, failing on a high or critical
// advisory. When the advisory database cannot be reached (this machine's registry mirror
// answers 405 to the bulk advisory endpoint), it says so in one line and passes, unless
// INTAKE_REQUIRE_AUDIT=1: a check that cannot run must not pass for one that ran clean.
import { spawnSync } from 'node:child_process';

const run = spawnSync('npm', ['audit', '--omit=dev', '--json'], { encoding: 'utf8' });
let report;
try {
  report = JSON.parse(run.stdout);
} catch {
  report = undefined;
}
const counts = report?.metadata?.vulnerabilities;
if (counts) {
  const serious = (counts.high ?? 0) + (counts.critical ?? 0);
  console.log(`npm audit (production dependencies): ${JSON.stringify(counts)}`);
  if (serious > 0) {
    console.error(`npm audit: ${serious} high or critical advisories in production dependencies; run npm audit --omit=dev`);
    process.exit(1);
  }
  process.exit(0);
}
const why = report?.message ?? run.stderr.trim().split('\n').pop() ?? `exit ${run.status}`;
console.log(`npm audit NOT CHECKED: the advisory database could not be reached (${why}).`);
process.exit(process.env.INTAKE_REQUIRE_AUDIT === '1' ? 1 : 0);
