-- wrk's script for a target whose requests must all differ (bench/signed-requests.ts): the
-- file named by the first argument after `--` holds the first body's number and then one
-- signature a line; `<file>.body` the rest of every body. Request n is the template with its
-- number in front, signed in the header named by the second argument. Past the last it
-- starts again (the bench counts those as repeated).

-- post.lua's method and its report at the end (done); init and request are this script's.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "post.lua")

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
