-- schedule_enable: turn a stored schedule on or off.
--
-- KEYS[1]      the schedule's hash
-- ARGV[1]      1 enabled, 0 disabled
-- Returns:     the schedule as a flat HGETALL array, or {} when there is none
--              of that name (nothing written)
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {}
end
redis.call('HSET', KEYS[1], 'enabled', ARGV[1])
return redis.call('HGETALL', KEYS[1])
