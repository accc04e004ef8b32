-- recovery_run: append a recovery run to the capped history.
--
-- KEYS[1]      recovery runs zset: score started_at, member the run as JSON
-- ARGV[1]      started_at, epoch seconds
-- ARGV[2]      the run, JSON
-- ARGV[3]      runs kept (the oldest beyond this are dropped)
-- Returns:     1
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -1 - tonumber(ARGV[3]))
return 1
