-- purge_count: how many jobs purge would delete with no limit (a dry run; read
-- only): those of the given statuses last updated before now - age.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: queue_names,
--              updated:<status>:queue:<queue> (score last_updated_at, µs) of
--              each status of ARGV[3] and each queue
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      age, seconds
-- ARGV[3]      statuses (e.g. "400 500 600")
-- Returns:     the count (ZCOUNT of each zset, summed)
--
-- @include lib/clock.lua

local before, total = '(' .. micros(now - tonumber(ARGV[2])), 0
local queues = redis.call('SMEMBERS', P .. 'queue_names')
for status in string.gmatch(ARGV[3], '%d+') do
  for _, queue in ipairs(queues) do
    total = total + redis.call('ZCOUNT', P .. 'updated:' .. status .. ':queue:' .. queue, '-inf', before)
  end
end
return total
