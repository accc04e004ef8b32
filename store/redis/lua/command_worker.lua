-- command_worker: leave an operator's command for a registered worker, which
-- reads it at its next registry heartbeat (worker_heartbeat.lua returns it).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: worker:<id> (hash)
-- ARGV[1]      command (one of store.records.WORKER_COMMANDS, checked in Python)
-- ARGV[2]      actor who sent it
-- ARGV[3]      worker id
-- Writes `command` and `command_by` only when the worker is registered (a
-- pruned or removed worker is not brought back as a partial hash). The
-- command 'unquiet' is not stored: it deletes both fields when the command
-- is 'quiet', and leaves any other command as it is.
-- Returns:     the worker hash as a flat HGETALL array, or an empty array when
--              there is no such worker (nothing written)

local worker = P .. 'worker:' .. ARGV[3]
if redis.call('EXISTS', worker) == 0 then
  return {}
end
if ARGV[1] == 'unquiet' then
  if redis.call('HGET', worker, 'command') == 'quiet' then
    redis.call('HDEL', worker, 'command', 'command_by')
  end
else
  redis.call('HSET', worker, 'command', ARGV[1], 'command_by', ARGV[2])
end
return redis.call('HGETALL', worker)
