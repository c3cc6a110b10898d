-- One path of the benchmark, for wrk (https://github.com/wg/wrk): `bench/run.py` sets it up
-- through the environment, and checks every answer.
--
--   BENCH_METHOD       GET, POST, PUT or DELETE
--   BENCH_PATH         the path; "{item}" in it is replaced by the request's item
--   BENCH_HEADERS      a file of "Name: value" lines (optional)
--   BENCH_BODY         a file holding the body (optional); "{item}" in it is replaced too
--   BENCH_ITEMS        a file of items, one a line (optional): tickets, resource set ids, tokens
--   BENCH_ONCE         "1": each item is used once (tickets, sets to delete); running out of
--                      items is counted, and the run reported as failed
--   BENCH_EXPECT       the expected status, e.g. "201"
--   BENCH_BODY_MATCH   a Lua pattern every expected answer's body must match (optional)
--
-- Items are shared out between wrk's threads (thread i takes every n-th, from the i-th). At the
-- end one line "BENCH-JSON {...}" on stdout carries the counts and the latency percentiles (in
-- microseconds) that `bench/run.py` reads.

local threads = {}
local counter = 0

function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

local function read_lines(path)
  local lines = {}
  if path == nil or path == "" then return lines end
  local file = assert(io.open(path, "r"))
  for line in file:lines() do
    if line ~= "" then table.insert(lines, line) end
  end
  file:close()
  return lines
end

local function read_all(path)
  if path == nil or path == "" then return nil end
  local file = assert(io.open(path, "rb"))
  local text = file:read("*a")
  file:close()
  return text
end

local function plain_replace(text, item)
  if text == nil or item == nil then return text end
  local first, last = string.find(text, "{item}", 1, true)
  if first == nil then return text end
  return string.sub(text, 1, first - 1) .. item .. string.sub(text, last + 1)
end

function init(args)
  method = os.getenv("BENCH_METHOD") or "GET"
  path = os.getenv("BENCH_PATH") or "/"
  body = read_all(os.getenv("BENCH_BODY"))
  once = os.getenv("BENCH_ONCE") == "1"
  expect = tonumber(os.getenv("BENCH_EXPECT") or "200")
  body_match = os.getenv("BENCH_BODY_MATCH")
  if body_match == "" then body_match = nil end
  headers = {}
  for _, line in ipairs(read_lines(os.getenv("BENCH_HEADERS"))) do
    local name, value = string.match(line, "^([^:]+):%s*(.*)$")
    headers[name] = value
  end
  local all = read_lines(os.getenv("BENCH_ITEMS"))
  local count = tonumber(os.getenv("BENCH_THREADS") or "1")
  items = {}
  for index, item in ipairs(all) do
    if (index - 1) % count == id then table.insert(items, item) end
  end
  next_item = 1
  expected = 0
  unexpected = 0
  exhausted = 0
  first_unexpected = ""
  -- Without items the request never changes: format it once.
  if #items == 0 then fixed = wrk.format(method, path, headers, body) end
end

function request()
  if fixed ~= nil then return fixed end
  local item = items[next_item]
  next_item = next_item + 1
  if next_item > #items then
    if once then
      -- Out of items: the last one again (its answer will not be the expected one).
      exhausted = exhausted + 1
      next_item = #items
    else
      next_item = 1
    end
  end
  return wrk.format(method, plain_replace(path, item), headers, plain_replace(body, item))
end

function response(status, response_headers, response_body)
  if status == expect and (body_match == nil or string.find(response_body or "", body_match) ~= nil) then
    expected = expected + 1
  else
    unexpected = unexpected + 1
    if first_unexpected == "" then
      first_unexpected = status .. " " .. string.sub(response_body or "", 1, 200)
    end
  end
end

local function quote(text)
  text = string.gsub(text, '[%c"\\]', function(c) return string.format("\\u%04x", string.byte(c)) end)
  return '"' .. text .. '"'
end

function done(summary, latency, requests)
  local expected_total, unexpected_total, exhausted_total, used = 0, 0, 0, 0
  local first = ""
  for _, thread in ipairs(threads) do
    expected_total = expected_total + thread:get("expected")
    unexpected_total = unexpected_total + thread:get("unexpected")
    exhausted_total = exhausted_total + thread:get("exhausted")
    used = used + thread:get("next_item") - 1
    if first == "" then first = thread:get("first_unexpected") end
  end
  local errors = summary.errors
  io.write(string.format(
    'BENCH-JSON {"requests": %d, "duration_us": %d, "expected": %d, "unexpected": %d,'
    .. ' "exhausted": %d, "items_used": %d, "first_unexpected": %s,'
    .. ' "errors": {"connect": %d, "read": %d, "write": %d, "timeout": %d},'
    .. ' "latency_us": {"p50": %d, "p95": %d, "p99": %d, "max": %d, "mean": %.1f}}\n',
    summary.requests, summary.duration, expected_total, unexpected_total, exhausted_total, used,
    quote(first), errors.connect, errors.read, errors.write, errors.timeout,
    latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.max,
    latency.mean))
end
