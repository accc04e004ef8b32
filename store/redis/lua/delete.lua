-- delete: an operator removes a job that is not InProgress (DELETE's row of
-- the lifecycle table), guarded by the status the caller read and checked
-- (lifecycle.check_operation). The job, its events, its index entries and
-- the idempotency and unique keys it holds go; the deletion is counted and,
-- for an operator actor, kept in the audit list.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: job:<id>, events:<id>,
--              attempts:<id>, ready:<queue>, scheduled:<queue>, idempotency, unique,
--              unique_until, leases, counters, audit, updated and listing zsets
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      operation name, 'delete': its row of the lifecycle table compiled into
--              the library (lib/job.lua `operation`)
-- ARGV[5]       job id
-- ARGV[6]      status the job must still have (one of the sources)
-- ARGV[7]      actor ('' for none)
-- Returns:     {1} deleted,
--              {0, status} the status changed meanwhile (nothing written),
--              {-1} no such job
--
-- @include lib/clock.lua
-- @include lib/job.lua

local op = operation(ARGV[4])
local id, expected, actor = ARGV[5], tonumber(ARGV[6]), none(ARGV[7])
local f, refused = operator_guard(id, op, expected, 'queue', 'rank', 'lease_token', 'idempotency_key', 'unique_key',
  'has_children')
if not f then
  return refused
end
local old = tonumber(f[1])
unqueue(f[3], f[2])
if f[7] then
  -- its waiting children, as if canceled (lib/flow.lua), and its edges
  flow.finished(id, FLOW.status.Canceled, actor)
  redis.call('DEL', P .. 'children:' .. id)
end
redis.call('DEL', P .. 'parents:' .. id, P .. 'remote_pending:' .. id)
remove_job(id, old, f[2], f[5], f[6])
audit_event(id, op.event, old, nil, actor, tonumber(f[4]) or 0, nil)
flush_counts()
return {1}
