-- release: give a lease back (graceful shutdown), guarded by status and token.
-- The job becomes Scheduled and due at once; retries are unchanged.
--
-- KEYS[1..10]  common block (lib/job.lua)
-- KEYS[11]     job hash
-- KEYS[12]     event list of the job
-- KEYS[13]     scheduled zset of the job's queue
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      job id
-- ARGV[5]      lease token the caller holds
-- ARGV[6]      actor (worker id, '' for none)
-- ARGV[7]      statuses a release starts from ("300")
-- ARGV[8]      status it leads to (Scheduled)
-- Returns:     {1, job as a flat HGETALL array} released,
--              {0, current token, status} refused (nothing written),
--              {-1} no such job
--
-- @include lib/clock.lua
-- @include lib/job.lua

local id, token, actor = ARGV[4], tonumber(ARGV[5]), none(ARGV[6])
local target = tonumber(ARGV[8])
local f = redis.call('HMGET', KEYS[11], 'status', 'lease_token', 'queue', 'priority')
if not f[1] then
  return {-1}
end
local old = tonumber(f[1])
if not status_set(ARGV[7])[old] or tonumber(f[2]) ~= token then
  return {0, f[2], f[1]}
end
local member = rank(f[4], now, id)
redis.call('HSET', KEYS[11], 'status', target, 'due_at', now, 'retry_delay_until', now,
  'last_updated_at', now, 'rank', member)
redis.call('HDEL', KEYS[11], 'worker_id', 'lease_expires_at')
redis.call('ZREM', KEYS[9], id)
redis.call('ZADD', KEYS[13], now, member)
move(id, f[3], old, target)
append_event(12, id, 'released', old, target, actor, token, nil)
flush_counts()
return {1, redis.call('HGETALL', KEYS[11])}
