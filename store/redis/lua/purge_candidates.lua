-- purge_candidates: finished jobs last updated before now - age (purge step 1;
-- read only), by status then oldest first, as the SQL store orders them.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: queue_names,
--              updated:<status>:queue:<queue> (score last_updated_at, µs) of
--              each status of ARGV[3] and each queue
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      age, seconds
-- ARGV[3]      statuses, finished ones (e.g. "400 500 600"), in this order
-- ARGV[4]      most ids returned
-- A status's oldest jobs are the oldest of its queues' zsets: up to the ids
-- still wanted from each queue, merged by score (then id), cut to that many.
-- Returns:     {id_1, score_1, status_1, id_2, ...} (score: last_updated_at, µs)
--
-- @include lib/clock.lua

local before, left = '(' .. micros(now - tonumber(ARGV[2])), tonumber(ARGV[4])
local queues = redis.call('SMEMBERS', P .. 'queue_names')
local out = {}
for status in string.gmatch(ARGV[3], '%d+') do
  if left <= 0 then
    break
  end
  local found = {}
  for _, queue in ipairs(queues) do
    local got = redis.call('ZRANGEBYSCORE', P .. 'updated:' .. status .. ':queue:' .. queue, '-inf', before,
      'WITHSCORES', 'LIMIT', '0', string.format('%d', left))
    for j = 1, #got, 2 do
      found[#found + 1] = {tonumber(got[j + 1]), got[j]}
    end
  end
  table.sort(found, function(a, b)
    return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2])
  end)
  for j = 1, math.min(left, #found) do
    out[#out + 1] = found[j][2]
    out[#out + 1] = string.format('%d', found[j][1])
    out[#out + 1] = status
  end
  left = left - math.min(left, #found)
end
return out
