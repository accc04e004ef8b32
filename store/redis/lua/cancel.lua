-- cancel: operator cancel, guarded by the status the caller read and checked
-- (lifecycle.check_operation). A running job's lease is revoked.
--
-- KEYS[1..9]   common block (lib/job.lua)
-- KEYS[10]     job hash
-- KEYS[11]     event list of the job
-- KEYS[12]     ready zset of the job's queue
-- KEYS[13]     scheduled zset of the job's queue
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      events kept per job
-- ARGV[3]      job id
-- ARGV[4]      status the job must still have
-- ARGV[5]      actor ('' for none)
-- ARGV[6]      status it leads to (Canceled)
-- Returns:     {1, job as a flat HGETALL array} canceled,
--              {0, status} the status changed meanwhile (nothing written),
--              {-1} no such job
--
-- @include lib/clock.lua
-- @include lib/job.lua

local id, expected, actor = ARGV[3], tonumber(ARGV[4]), none(ARGV[5])
local target = tonumber(ARGV[6])
local f = redis.call('HMGET', KEYS[10], 'status', 'lease_token', 'queue', 'rank')
if not f[1] then
  return {-1}
end
local old = tonumber(f[1])
if old ~= expected then
  return {0, f[1]}
end
if f[4] then
  redis.call('ZREM', KEYS[12], f[4])
  redis.call('ZREM', KEYS[13], f[4])
end
redis.call('HSET', KEYS[10], 'status', target, 'completed_at', now, 'last_updated_at', now)
redis.call('HDEL', KEYS[10], 'lease_expires_at', 'rank')
redis.call('ZREM', KEYS[9], id)
move(id, f[3], old, target)
append_event(11, 'canceled', old, target, actor, tonumber(f[2]), nil)
return {1, redis.call('HGETALL', KEYS[10])}
