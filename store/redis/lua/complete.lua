-- complete: ack one or many jobs, each guarded on its own by status and token.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: job:<id>,
--              events:<id>, leases, counters, history, updated and listing zsets
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      operation name, 'complete': its row of the lifecycle table compiled into
--              the library (lib/job.lua `operation`)
-- ARGV[5]      actor (worker id, '' for none)
-- ARGV[6]      1: return each completed job; 0: do not (a worker's acks)
-- then 3 values per ack, ARGV[7 + 3(i-1)] ...: job id, lease token held,
--              result JSON (written to the `result` field)
-- A job with children (`has_children`) releases or cancels those waiting
-- for it (lib/flow.lua `flow.finished`), one of a limited queue leaves its
-- running count (`counted`, `flow.left`), in this call.
-- Each completion is counted in the history buckets of its queue; its event
-- is `run` and `completed_by` in the hash (lib/job.lua `happen`).
-- Returns:     one entry per ack: {1, job as a flat HGETALL array} completed
--              ({1} when ARGV[6] is 0), {0, current token, status} refused
--              (nothing written), {-1} no such job
--
-- @include lib/clock.lua
-- @include lib/job.lua

local op = operation(ARGV[4])
local actor, want_jobs = none(ARGV[5]), ARGV[6] == '1'
local out = {}
for i = 1, (#ARGV - 6) / 3 do
  local a = 7 + 3 * (i - 1)
  local id, token = ARGV[a], tonumber(ARGV[a + 1])
  local job = P .. 'job:' .. id
  local f = redis.call('HMGET', job, 'status', 'lease_token', 'queue', 'run', 'name',
    'has_children', 'counted')
  local old = tonumber(f[1])
  if not old then
    out[i] = {-1}
  elseif not op.sources[old] or tonumber(f[2]) ~= token then
    out[i] = {0, f[2], f[1]}
  else
    move(id, f[3], old, op.target, f[5])
    if f[4] == RUN_CLAIMED then
      change(id, op, op.target, {'result', ARGV[a + 2], 'run', RUN_COMPLETED, 'completed_by', actor or ''})
      happen(id, op.event, old, op.target, actor, token)
    else  -- claimed by a version that appended its claimed event
      change(id, op, op.target, {'result', ARGV[a + 2]})
      append_event(id, op.event, old, op.target, actor, token, nil)
    end
    redis.call('ZREM', P .. 'leases', id)
    if f[7] then
      flow.left(id, f[3], f[7])
    end
    if f[6] then
      flow.finished(id, op.target, actor)
    end
    count_history(f[3], op.event)
    if want_jobs then
      out[i] = {1, redis.call('HGETALL', job)}
    else
      out[i] = {1}
    end
  end
end
flush_counts()
return out
