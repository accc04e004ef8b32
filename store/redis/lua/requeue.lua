-- requeue: operator requeue or retry-now, guarded by the status the caller
-- read and checked (lifecycle.check_operation). The job becomes Queued, due now.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: job:<id>, events:<id>,
--              ready:<queue>, scheduled:<queue>, leases, counters, updated and listing zsets
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      operation name, 'requeue' or 'retry_now': its row of the lifecycle table compiled into
--              the library (lib/job.lua `operation`)
-- ARGV[5]       job id
-- ARGV[6]      status the job must still have (one of the sources)
-- ARGV[7]      actor ('' for none)
-- ARGV[8]      1: reset retry_count and lease_expirations to 0; 0: keep them
-- Returns:     {1, job as a flat HGETALL array} requeued,
--              {0, status} the status changed meanwhile (nothing written),
--              {2, parent id, parent status} refused: a parent has not finished
--              (op.await_parents, lifecycle.AWAIT_PARENTS; nothing written),
--              {-1} no such job
--
-- @include lib/clock.lua
-- @include lib/job.lua

local op = operation(ARGV[4])
local id, expected, actor = ARGV[5], tonumber(ARGV[6]), none(ARGV[7])
local f, refused = operator_guard(id, op, expected, 'lease_token', 'queue', 'rank', 'priority',
  'pending_parents', 'limit_key')
if not f then
  return refused
end
if op.await_parents and f[6] then  -- a job with parents runs after them (lifecycle.unfinished_parent)
  local parents = redis.call('SMEMBERS', P .. 'parents:' .. id)
  table.sort(parents)
  for _, parent in ipairs(parents) do
    local status = redis.call('HGET', P .. 'job:' .. parent, 'status')
    if UNIQUE_HOLDING[status or ''] then  -- the status texts not lifecycle.TERMINAL
      return {2, parent, status}
    end
  end
end
local old = tonumber(f[1])
unqueue(f[4], f[3])
local member = rank(f[5], now, id)
local set = {'rank', member}
if ARGV[8] == '1' then
  set = {'rank', member, 'retry_count', 0, 'lease_expirations', 0}
end
move(id, f[3], old, op.target)
change(id, op, op.target, set)
ready_add(f[3], member, f[7])
append_event(id, op.event, old, op.target, actor, tonumber(f[2]) or 0, nil)
flush_counts()
return {1, redis.call('HGETALL', P .. 'job:' .. id)}
