-- wrk's script for a target whose requests must all differ (bench/signed-requests.ts): the
-- file named by the first argument after `--` holds the first body's number and then one
-- signature a line; `<file>.body` the rest of every body. Request n is the template with its
-- number in front, signed in the header named by the second argument. Past the last it
-- starts again (the bench counts those as repeated). The end's JSON line is post.lua's.

wrk.method = "POST"

local signatures = {}
local first = 0
local rest = ""
local header = ""
local headers = {}
local next_request = 1

function init(args)
  local body_file = assert(io.open(args[1] .. ".body", "rb"))
  rest = body_file:read("*a")
  body_file:close()
  local file = assert(io.open(args[1], "rb"))
  first = tonumber(file:read("*l"))
  for line in file:lines() do signatures[#signatures + 1] = line end
  file:close()
  header = args[2]
  for name, value in pairs(wrk.headers) do headers[name] = value end
end

function request()
  local n = next_request
  next_request = next_request % #signatures + 1
  headers[header] = signatures[n]
  return wrk.format(nil, nil, headers, '{"bench_request":"' .. string.format("%012d", first + n - 1) .. '",' .. rest)
end

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
