-- command_worker: leave an operator's command for a registered worker, which
-- reads it at its next registry heartbeat (worker_heartbeat.lua returns it).
--
-- KEYS[1]      worker hash
-- ARGV[1]      command (one of store.records.WORKER_COMMANDS, checked in Python)
-- ARGV[2]      actor who sent it
-- Writes `command` and `command_by` only when the worker is registered (a
-- pruned or removed worker is not brought back as a partial hash).
-- Returns:     the worker hash as a flat HGETALL array, or an empty array when
--              there is no such worker (nothing written)

if redis.call('EXISTS', KEYS[1]) == 0 then
  return {}
end
redis.call('HSET', KEYS[1], 'command', ARGV[1], 'command_by', ARGV[2])
return redis.call('HGETALL', KEYS[1])
