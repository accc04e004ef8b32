-- counts: the jobs of each status by queue, counted from the indexes (read
-- only; no status counter is written anywhere: docs/architecture.md, Redis
-- key schema).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: queue_names,
--              updated:<status>:queue:<queue> (the listing zsets by queue),
--              leases, job:<id> (queue of a lease)
-- ARGV[1]      the status codes to count from their listing zsets ("100 200 400 500 600")
-- ARGV[2]      the status a lease is held in (InProgress): counted from the leases
--              zset, each lease's job's queue read (bounded by the jobs in flight)
-- Each queue ever indexed (queue_names) is counted with one ZCARD a status:
-- O(queues x statuses), no scan.
-- Returns:     {status, queue, n, status, queue, n, ...} (n > 0 only)

local out = {}
local queues = redis.call('SMEMBERS', P .. 'queue_names')
for code in string.gmatch(ARGV[1], '%d+') do
  local by = P .. 'updated:' .. code .. ':queue:'
  for _, queue in ipairs(queues) do
    local n = redis.call('ZCARD', by .. queue)
    if n > 0 then
      out[#out + 1] = code
      out[#out + 1] = queue
      out[#out + 1] = n
    end
  end
end
local held, by_queue, leased = ARGV[2], {}, {}
for _, id in ipairs(redis.call('ZRANGE', P .. 'leases', 0, -1)) do
  local queue = redis.call('HGET', P .. 'job:' .. id, 'queue')
  if queue then
    if not by_queue[queue] then
      leased[#leased + 1] = queue
    end
    by_queue[queue] = (by_queue[queue] or 0) + 1
  end
end
for _, queue in ipairs(leased) do
  out[#out + 1] = held
  out[#out + 1] = queue
  out[#out + 1] = by_queue[queue]
end
return out
