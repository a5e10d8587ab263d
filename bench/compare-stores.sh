#!/usr/bin/env bash
# One node on SQLite next to one node on PostgreSQL, same machine, same load, alternating
# rounds so drift in the machine's load hits both alike. Prints requests/s and latency of
# each round (autocannon), then the medians and the PostgreSQL/SQLite ratio.
#
#   bench/compare-stores.sh [rounds=3] [seconds=8] [connections=64]
#
# Needs `npm run build` first, and PostgreSQL at $BENCH_POSTGRES_URL (default the local
# server); creates and drops a database of its own. Stopgap until `npm run bench` (issue 6).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3} SECONDS_PER_ROUND=${2:-8} CONNECTIONS=${3:-64}
ADMIN_URL=${BENCH_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres}
DB=intake_bench_$$
WORK=$(mktemp -d)
PG_URL=${ADMIN_URL%/*}/$DB
psql "$ADMIN_URL" -qc "create database $DB"
cleanup() {
  kill $(jobs -p) 2>/dev/null || true
  wait 2>/dev/null || true
  psql "$ADMIN_URL" -qc "drop database if exists $DB with (force)" || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# A 1.1 KB event, like a payment provider's.
node -e 'const pad = "x".repeat(900); process.stdout.write(JSON.stringify({event: "invoice.paid", data: {id: "in_1", customer: "cus_1", amount: 4200, currency: "eur", lines: [{id: "li_1", description: pad}]}}))' > "$WORK/body.json"

start_node() { # name databaseUrl port
  INTAKE_DATABASE_URL=$2 PORT=$3 HOST=127.0.0.1 LOG_LEVEL=warn node dist/main.js > "$WORK/$1.log" 2>&1 &
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$3/readyz" > /dev/null && break; sleep 0.1; done
  local company integration
  company=$(INTAKE_DATABASE_URL=$2 node dist/cli/main.js company create --name bench --json | node -pe 'JSON.parse(require("fs").readFileSync(0)).id')
  integration=$(INTAKE_DATABASE_URL=$2 node dist/cli/main.js integration create --company "$company" --name bench --json)
  echo "$integration" > "$WORK/$1.json"
}

start_node sqlite "sqlite:$WORK/intake.db" 18101
start_node postgres "$PG_URL" 18102

run_round() { # name port
  local key address
  key=$(node -pe "require('$WORK/$1.json').api_key")
  address=$(node -pe "require('$WORK/$1.json').integration_key")
  npx --yes autocannon@8 -j -c "$CONNECTIONS" -d "$SECONDS_PER_ROUND" -m POST \
    -H content-type=application/json -H "x-api-key=$key" -i "$WORK/body.json" \
    "http://127.0.0.1:$2/api/webhooks/$address" 2> /dev/null \
    | node -e 'const r = JSON.parse(require("fs").readFileSync(0)); console.log(JSON.stringify({rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, non2xx: r.non2xx, errors: r.errors}))'
}

for round in $(seq 1 "$ROUNDS"); do
  for name in sqlite postgres; do
    port=$([ $name = sqlite ] && echo 18101 || echo 18102)
    echo "$name $(run_round $name $port)" | tee -a "$WORK/results"
  done
done

node -e '
const lines = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n");
const by = {};
for (const line of lines) { const [name, json] = [line.slice(0, line.indexOf(" ")), line.slice(line.indexOf(" ") + 1)]; (by[name] ??= []).push(JSON.parse(json)); }
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
for (const [name, rounds] of Object.entries(by)) console.log(`${name}: median ${median(rounds.map((r) => r.rps)).toFixed(0)} req/s, p50 ${median(rounds.map((r) => r.p50))} ms, p99 ${median(rounds.map((r) => r.p99))} ms`);
console.log(`postgres/sqlite: ${(median(by.postgres.map((r) => r.rps)) / median(by.sqlite.map((r) => r.rps))).toFixed(2)}`);
' "$WORK/results"
