-- purge_count: how many jobs purge would delete with no limit (a dry run; read
-- only): those of the given statuses last updated before now - age.
--
-- KEYS[1..n]   updated:<status> zsets of the statuses (score last_updated_at)
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      age, seconds
-- Returns:     the count (ZCOUNT of each zset, summed)
--
-- @include lib/clock.lua

local before, total = '(' .. fmt(now - tonumber(ARGV[2])), 0
for i = 1, #KEYS do
  total = total + redis.call('ZCOUNT', KEYS[i], '-inf', before)
end
return total
