-- release: give a lease back (graceful shutdown), guarded by status and token.
-- The job becomes Scheduled and due at once; retries are unchanged.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: job:<id>, events:<id>,
--              scheduled:<queue>, leases, counters, updated and listing zsets
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      operation name, 'release': its row of the lifecycle table compiled into
--              the library (lib/job.lua `operation`)
-- ARGV[5]       job id
-- ARGV[6]      lease token the caller holds
-- ARGV[7]      actor (worker id, '' for none)
-- ARGV[8..9]   optional: a worker id and an entry of its hand-over list
--              hand:<worker> (lib/hand_over.lua `hand_over`): the release applies
--              only if that entry is still there, and takes it off (recovery
--              of a job its worker never popped, store/redis/recovery.py)
-- Returns:     {1, job as a flat HGETALL array} released,
--              {0, current token, status} refused (nothing written),
--              {-1} no such job,
--              {-2} the hand-over entry was gone: its worker popped it (nothing written)
--
-- @include lib/clock.lua
-- @include lib/job.lua

local op = operation(ARGV[4])
local id, token, actor = ARGV[5], tonumber(ARGV[6]), none(ARGV[7])
local f = redis.call('HMGET', P .. 'job:' .. id, 'status', 'lease_token', 'queue', 'priority', 'counted')
if not f[1] then
  return {-1}
end
local old = tonumber(f[1])
if not op.sources[old] or (tonumber(f[2]) or 0) ~= token then
  return {0, f[2] or '0', f[1]}
end
local handed_to = ARGV[8]
if handed_to and handed_to ~= '' and redis.call('LREM', P .. 'hand:' .. handed_to, 1, ARGV[9]) == 0 then
  return {-2}
end
local member = rank(f[4], now, id)
settle(id)
move(id, f[3], old, op.target)
change(id, op, op.target, {'rank', member})
redis.call('ZREM', P .. 'leases', id)
if f[5] then
  flow.left(id, f[3], f[5])  -- a limited queue's running count (lib/flow.lua)
end
redis.call('ZADD', P .. 'scheduled:' .. f[3], now, member)
append_event(id, op.event, old, op.target, actor, token, nil)
flush_counts()
return {1, redis.call('HGETALL', P .. 'job:' .. id)}
