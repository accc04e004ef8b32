-- worker_remove: drop a worker from the registry (clean exit).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: worker:<id> (hash), workers (zset)
-- ARGV[1]      worker id
-- Returns:     1 removed, 0 it was not registered
local removed = redis.call('DEL', P .. 'worker:' .. ARGV[1])
redis.call('ZREM', P .. 'workers', ARGV[1])
return removed
