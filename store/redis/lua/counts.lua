-- counts: the jobs of each status by queue, counted from the indexes (read
-- only; no status counter is written anywhere: docs/architecture.md, Redis
-- key schema).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: updated:<status>:queue
--              (the listing zsets by queue), leases, job:<id> (queue of a lease)
-- ARGV[1]      the status codes to count from their listing zsets ("100 200 400 500 600")
-- ARGV[2]      the status a lease is held in (InProgress): counted from the leases
--              zset, each lease's job's queue read (bounded by the jobs in flight)
-- Each queue of a listing zset by queue is found with one ZRANGEBYLEX of the
-- first member past the previous queue's range, then counted with ZLEXCOUNT
-- of its range [<queue>\0, (<queue>\1: O(queues x log N), no scan.
-- Returns:     {status, queue, n, status, queue, n, ...} (n > 0 only)

local out = {}
for code in string.gmatch(ARGV[1], '%d+') do
  local index = P .. 'updated:' .. code .. ':queue'
  local low = '-'
  while true do
    local first = redis.call('ZRANGEBYLEX', index, low, '+', 'LIMIT', 0, 1)[1]
    if not first then
      break
    end
    local queue = string.sub(first, 1, string.find(first, '\0', 1, true) - 1)
    local n = redis.call('ZLEXCOUNT', index, '[' .. queue .. '\0', '(' .. queue .. '\1')
    out[#out + 1] = code
    out[#out + 1] = queue
    out[#out + 1] = n
    low = '[' .. queue .. '\1'
  end
end
local held, by_queue, queues = ARGV[2], {}, {}
for _, id in ipairs(redis.call('ZRANGE', P .. 'leases', 0, -1)) do
  local queue = redis.call('HGET', P .. 'job:' .. id, 'queue')
  if queue then
    if not by_queue[queue] then
      queues[#queues + 1] = queue
    end
    by_queue[queue] = (by_queue[queue] or 0) + 1
  end
end
for _, queue in ipairs(queues) do
  out[#out + 1] = held
  out[#out + 1] = queue
  out[#out + 1] = by_queue[queue]
end
return out
