-- wrk's script for the bench's closed loop (bench/wrk.ts): POSTs the body in the file named
-- by the first argument after `--`, with the headers given by -H, and at the end prints one
-- line of JSON for the bench to parse (wrk's own report comes before it).
--
-- No response() function: defining one makes wrk hand every answer's headers and body to
-- Lua, which cost 7 to 10 % of the baseline's throughput and multiplied its p99 by 3 to 7
-- (wrk's own pauses, counted as the server's latency; see bench/README.md). Non-2xx
-- answers are wrk's own count instead, errors.status: statuses of 400 and above. The
-- targets answer no 1xx or 3xx.

wrk.method = "POST"

function init(args)
  local file = assert(io.open(args[1], "rb"))
  wrk.body = file:read("*a")
  file:close()
end

-- Durations and latencies in microseconds, as wrk keeps them.
function done(summary, latency, requests)
  local errors = summary.errors
  io.write(string.format(
    '{"durationUs":%d,"requests":%d,"non2xx":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"timeout":%d},' ..
    '"latencyUs":{"p50":%d,"p99":%d,"p99_9":%d,"max":%d}}\n',
    summary.duration, summary.requests, errors.status,
    errors.connect, errors.read, errors.write, errors.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max))
end
