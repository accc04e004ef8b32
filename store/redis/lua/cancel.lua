-- cancel: operator cancel, guarded by the status the caller read and checked
-- (lifecycle.check_operation). A running job's lease is revoked.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: job:<id>, events:<id>,
--              ready:<queue>, scheduled:<queue>, leases, counters, updated and listing zsets
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      operation name, 'cancel': its row of the lifecycle table compiled into
--              the library (lib/job.lua `operation`)
-- ARGV[5]       job id
-- ARGV[6]      status the job must still have (one of the sources)
-- ARGV[7]      actor ('' for none)
-- Returns:     {1, job as a flat HGETALL array} canceled,
--              {0, status} the status changed meanwhile (nothing written),
--              {-1} no such job
--
-- @include lib/clock.lua
-- @include lib/job.lua

local op = operation(ARGV[4])
local id, expected, actor = ARGV[5], tonumber(ARGV[6]), none(ARGV[7])
local f, refused = operator_guard(id, op, expected, 'lease_token', 'queue', 'rank', 'counted', 'has_children')
if not f then
  return refused
end
local old = tonumber(f[1])
settle(id)
unqueue(f[4], f[3])
move(id, f[3], old, op.target)
change(id, op, op.target, nil, {'rank'})
redis.call('ZREM', P .. 'leases', id)
append_event(id, op.event, old, op.target, actor, tonumber(f[2]) or 0, nil)
if f[5] then
  flow.left(id, f[3], f[5])  -- a limited queue's running count (lib/flow.lua)
end
if f[6] then
  flow.finished(id, op.target, actor)  -- its waiting children (lib/flow.lua)
end
flush_counts()
return {1, redis.call('HGETALL', P .. 'job:' .. id)}
