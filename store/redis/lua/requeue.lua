-- requeue: operator requeue or retry-now, guarded by the status the caller
-- read and checked (lifecycle.check_operation). The job becomes Queued, due now.
--
-- KEYS[1..10]  common block (lib/job.lua)
-- KEYS[11]     job hash
-- KEYS[12]     event list of the job
-- KEYS[13]     ready zset of the job's queue
-- KEYS[14]     scheduled zset of the job's queue
-- KEYS[#KEYS - 17 .. #KEYS] listing block (lib/job.lua `listing_last`)
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      operation name, 'requeue' or 'retry_now': its row of the lifecycle table compiled into
--              the library (lib/job.lua `operation`)
-- ARGV[5]      job id
-- ARGV[6]     status the job must still have (one of the sources)
-- ARGV[7]     actor ('' for none)
-- ARGV[8]     1: reset retry_count and lease_expirations to 0; 0: keep them
-- Returns:     {1, job as a flat HGETALL array} requeued,
--              {0, status} the status changed meanwhile (nothing written),
--              {-1} no such job
--
-- @include lib/clock.lua
-- @include lib/job.lua

local op = operation(ARGV[4])
listing_last()
local id, expected, actor = ARGV[5], tonumber(ARGV[6]), none(ARGV[7])
local f, refused = operator_guard(11, op, expected, 'lease_token', 'queue', 'rank', 'priority')
if not f then
  return refused
end
local old = tonumber(f[1])
unqueue(f[4], 13, 14)
local member = rank(f[5], now, id)
local set = {'rank', member}
if ARGV[8] == '1' then
  set = {'rank', member, 'retry_count', 0, 'lease_expirations', 0}
end
move(11, id, f[3], old, op.target)
change(11, op, op.target, set)
redis.call('ZADD', KEYS[13], 0, member)
append_event(12, id, op.event, old, op.target, actor, tonumber(f[2]), nil)
flush_counts()
return {1, redis.call('HGETALL', KEYS[11])}
