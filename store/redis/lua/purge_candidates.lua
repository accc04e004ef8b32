-- purge_candidates: finished jobs last updated before now - age (purge step 1;
-- read only), by status then oldest first, as the SQL store orders them.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: queue_names, the
--              listing zsets updated:<status>:queue:<queue> (score
--              last_updated_at, µs) of each status of ARGV[3]
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      age, seconds
-- ARGV[3]      statuses, finished ones (e.g. "400 500 600"), in this order
-- ARGV[4]      most ids returned
-- A status's oldest jobs are the oldest of its queues' zsets: at most `left`
-- read from each queue, merged by (score, id).
-- Returns:     {id_1, id_2, ...}
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
    local got = redis.call('ZRANGE', P .. 'updated:' .. status .. ':queue:' .. queue, '-inf', before,
      'BYSCORE', 'LIMIT', 0, left, 'WITHSCORES')
    for i = 1, #got, 2 do
      found[#found + 1] = {tonumber(got[i + 1]), got[i]}
    end
  end
  table.sort(found, function(a, b)
    if a[1] ~= b[1] then
      return a[1] < b[1]
    end
    return a[2] < b[2]
  end)
  for i = 1, math.min(left, #found) do
    out[#out + 1] = found[i][2]
  end
  left = left - math.min(left, #found)
end
return out
