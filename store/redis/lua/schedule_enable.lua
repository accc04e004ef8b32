-- schedule_enable: turn a stored schedule on or off.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: schedule:<name> (hash)
-- ARGV[1]      1 enabled, 0 disabled
-- ARGV[2]      schedule name
-- Returns:     the schedule as a flat HGETALL array, or {} when there is none
--              of that name (nothing written)
local schedule = P .. 'schedule:' .. ARGV[2]
if redis.call('EXISTS', schedule) == 0 then
  return {}
end
redis.call('HSET', schedule, 'enabled', ARGV[1])
return redis.call('HGETALL', schedule)
