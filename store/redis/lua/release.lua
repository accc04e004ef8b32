-- release: give a lease back (graceful shutdown), guarded by status and token.
-- The job becomes Scheduled and due at once; retries are unchanged.
--
-- KEYS[1..9]   common block (lib/job.lua)
-- KEYS[10]     job hash
-- KEYS[11]     event list of the job
-- KEYS[12]     scheduled zset of the job's queue
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      events kept per job
-- ARGV[3]      job id
-- ARGV[4]      lease token the caller holds
-- ARGV[5]      actor (worker id, '' for none)
-- ARGV[6]      statuses a release starts from ("300")
-- ARGV[7]      status it leads to (Scheduled)
-- Returns:     {1, job as a flat HGETALL array} released,
--              {0, current token, status} refused (nothing written),
--              {-1} no such job
--
-- @include lib/clock.lua
-- @include lib/job.lua

local id, token, actor = ARGV[3], tonumber(ARGV[4]), none(ARGV[5])
local target = tonumber(ARGV[7])
local f = redis.call('HMGET', KEYS[10], 'status', 'lease_token', 'queue', 'priority')
if not f[1] then
  return {-1}
end
local old = tonumber(f[1])
if not status_set(ARGV[6])[old] or tonumber(f[2]) ~= token then
  return {0, f[2], f[1]}
end
local member = rank(f[4], now, id)
redis.call('HSET', KEYS[10], 'status', target, 'due_at', now, 'retry_delay_until', now,
  'last_updated_at', now, 'rank', member)
redis.call('HDEL', KEYS[10], 'worker_id', 'lease_expires_at')
redis.call('ZREM', KEYS[9], id)
redis.call('ZADD', KEYS[12], now, member)
move(id, f[3], old, target)
append_event(11, 'released', old, target, actor, token, nil)
return {1, redis.call('HGETALL', KEYS[10])}
