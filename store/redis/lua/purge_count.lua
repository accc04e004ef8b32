-- purge_count: how many jobs purge would delete with no limit (a dry run; read
-- only): those of the given statuses last updated before now - age.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: updated:<status>
--              (score last_updated_at, µs) of each status of ARGV[3]
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      age, seconds
-- ARGV[3]      statuses (e.g. "400 500 600")
-- Returns:     the count (ZCOUNT of each zset, summed)
--
-- @include lib/clock.lua

local before, total = '(' .. micros(now - tonumber(ARGV[2])), 0
for status in string.gmatch(ARGV[3], '%d+') do
  total = total + redis.call('ZCOUNT', P .. 'updated:' .. status, '-inf', before)
end
return total
