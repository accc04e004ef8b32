-- record_run: append a run to a capped history (recovery runs, and the runs
-- of each maintenance task).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: recovery_runs, or
--              maintenance_runs:<task> (zsets: score started_at, member the run as
--              JSON, to_record)
-- ARGV[1]      started_at, epoch seconds
-- ARGV[2]      the run, JSON
-- ARGV[3]      runs kept (the oldest beyond this are dropped)
-- ARGV[4]      maintenance task, '' for a recovery run
-- Returns:     1
local runs = P .. 'recovery_runs'
if ARGV[4] ~= '' then
  runs = P .. 'maintenance_runs:' .. ARGV[4]
end
redis.call('ZADD', runs, ARGV[1], ARGV[2])
redis.call('ZREMRANGEBYRANK', runs, 0, -1 - tonumber(ARGV[3]))
return 1
