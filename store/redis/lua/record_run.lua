-- record_run: append a run to a capped history (recovery runs, and the runs
-- of each maintenance task).
--
-- KEYS[1]      runs zset: score started_at, member the run as JSON (to_record)
-- ARGV[1]      started_at, epoch seconds
-- ARGV[2]      the run, JSON
-- ARGV[3]      runs kept (the oldest beyond this are dropped)
-- Returns:     1
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -1 - tonumber(ARGV[3]))
return 1
