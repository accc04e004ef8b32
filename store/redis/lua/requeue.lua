-- requeue: operator requeue or retry-now, guarded by the status the caller
-- read and checked (lifecycle.check_operation). The job becomes Queued, due now.
--
-- KEYS[1..10]  common block (lib/job.lua)
-- KEYS[11]     job hash
-- KEYS[12]     event list of the job
-- KEYS[13]     ready zset of the job's queue
-- KEYS[14]     scheduled zset of the job's queue
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      job id
-- ARGV[5]      status the job must still have
-- ARGV[6]      actor ('' for none)
-- ARGV[7]      status it leads to (Queued)
-- ARGV[8]      1: reset retry_count and lease_expirations to 0; 0: keep them
-- ARGV[9]      event kind ("requeued" or "retried_now")
-- Returns:     {1, job as a flat HGETALL array} requeued,
--              {0, status} the status changed meanwhile (nothing written),
--              {-1} no such job
--
-- @include lib/clock.lua
-- @include lib/job.lua

local id, expected, actor = ARGV[4], tonumber(ARGV[5]), none(ARGV[6])
local target = tonumber(ARGV[7])
local f = redis.call('HMGET', KEYS[11], 'status', 'lease_token', 'queue', 'rank', 'priority')
if not f[1] then
  return {-1}
end
local old = tonumber(f[1])
if old ~= expected then
  return {0, f[1]}
end
if f[4] then
  redis.call('ZREM', KEYS[13], f[4])
  redis.call('ZREM', KEYS[14], f[4])
end
local member = rank(f[5], now, id)
redis.call('HSET', KEYS[11], 'status', target, 'due_at', now, 'last_updated_at', now, 'rank', member)
redis.call('HDEL', KEYS[11], 'retry_delay_until', 'worker_id', 'lease_expires_at', 'completed_at')
if ARGV[8] == '1' then
  redis.call('HSET', KEYS[11], 'retry_count', 0, 'lease_expirations', 0)
end
redis.call('ZADD', KEYS[13], 0, member)
move(id, f[3], old, target)
append_event(12, id, ARGV[9], old, target, actor, tonumber(f[2]), nil)
flush_counts()
return {1, redis.call('HGETALL', KEYS[11])}
