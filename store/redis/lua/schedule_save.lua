-- schedule_save: upsert declared schedules by name. Their definition fields
-- are written; what operators and the scheduler set is kept (enabled, which a
-- new schedule starts as 1; last_tick_at and last_job_id).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: schedules (zset: schedule names,
--              every score 0, byte order = by name), schedule:<name> (hash)
-- ARGV         7 per schedule, ARGV[7(i-1) + 1 ..]: name, handler, cron,
--              timezone, queue, payload (JSON), catch_up (1 or 0)
-- Returns:     number of schedules saved
local n = #ARGV / 7
for i = 1, n do
  local a = 7 * (i - 1)
  local schedule = P .. 'schedule:' .. ARGV[a + 1]
  redis.call('HSET', schedule, 'name', ARGV[a + 1], 'handler', ARGV[a + 2], 'cron', ARGV[a + 3],
    'timezone', ARGV[a + 4], 'queue', ARGV[a + 5], 'payload', ARGV[a + 6], 'catch_up', ARGV[a + 7])
  redis.call('HSETNX', schedule, 'enabled', 1)
  redis.call('ZADD', P .. 'schedules', 0, ARGV[a + 1])
end
return n
