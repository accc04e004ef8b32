-- worker_remove: drop a worker from the registry (clean exit).
--
-- KEYS[1]      worker hash
-- KEYS[2]      workers zset
-- ARGV[1]      worker id
-- Returns:     1 removed, 0 it was not registered
local removed = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return removed
