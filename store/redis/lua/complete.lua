-- complete: ack, guarded by status and lease token.
--
-- KEYS[1..9]   common block (lib/job.lua)
-- KEYS[10]     job hash
-- KEYS[11]     event list of the job
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      events kept per job
-- ARGV[3]      job id
-- ARGV[4]      lease token the caller holds
-- ARGV[5]      result, JSON text
-- ARGV[6]      actor (worker id, '' for none)
-- ARGV[7]      statuses an ack starts from ("300")
-- ARGV[8]      status it leads to (Completed)
-- Returns:     {1, job as a flat HGETALL array} completed,
--              {0, current token, status} refused (nothing written),
--              {-1} no such job
--
-- @include lib/clock.lua
-- @include lib/job.lua

local id, token, actor = ARGV[3], tonumber(ARGV[4]), none(ARGV[6])
local target = tonumber(ARGV[8])
local f = redis.call('HMGET', KEYS[10], 'status', 'lease_token', 'queue')
if not f[1] then
  return {-1}
end
local old = tonumber(f[1])
if not status_set(ARGV[7])[old] or tonumber(f[2]) ~= token then
  return {0, f[2], f[1]}
end
redis.call('HSET', KEYS[10], 'status', target, 'result', ARGV[5], 'completed_at', now, 'last_updated_at', now)
redis.call('HDEL', KEYS[10], 'lease_expires_at')
redis.call('ZREM', KEYS[9], id)
move(id, f[3], old, target)
append_event(11, 'completed', old, target, actor, token, nil)
return {1, redis.call('HGETALL', KEYS[10])}
