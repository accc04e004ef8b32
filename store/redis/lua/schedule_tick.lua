-- schedule_tick: note that a tick of a schedule enqueued a job; last_tick_at
-- only moves forward (an older tick, reported late, changes nothing).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: schedule:<name> (hash)
-- ARGV[1]      tick time, epoch seconds
-- ARGV[2]      id of the job the tick enqueued
-- ARGV[3]      schedule name
-- Returns:     1 recorded, 0 not (no such schedule, or an older tick)
local schedule = P .. 'schedule:' .. ARGV[3]
if redis.call('EXISTS', schedule) == 0 then
  return 0
end
local last = redis.call('HGET', schedule, 'last_tick_at')
if last and tonumber(last) > tonumber(ARGV[1]) then
  return 0
end
redis.call('HSET', schedule, 'last_tick_at', ARGV[1], 'last_job_id', ARGV[2])
return 1
