-- lib/ack.lua: the ack of one job, a section of the library's top level
-- after lib/job.lua (store/redis/scripts.py), called by lua/complete.lua and
-- lua/complete_claim.lua. Its caller includes lib/clock.lua and
-- lib/job.lua and calls flush_counts().
--
-- KEYS, ARGV: none of its own.
-- Keys written: job:<id>, events:<id> (a job claimed by an earlier version),
-- leases, the history, the handler's minute bucket (lib/handler_minutes.lua)
-- and what lib/job.lua `move` writes.
-- Returns: nothing. Defines complete_job.

-- Complete job `id` if it is in a source status of `op` (the complete row
-- of the lifecycle table) with lease token `token`: status, stamps, `result`
-- (JSON text) and, when `progress` is not nil, the run's last progress report
-- (a JSON object without its time, {"fraction": f, "message": m}, written
-- with "at": now added, as lua/progress.lua does) in one HSET; out of the
-- leases zset; counted in the history of its queue; out of its limited
-- queue's running count, and its waiting children released or canceled
-- (lib/flow.lua). The completed event is `run` and `completed_by` in the hash
-- (lib/job.lua `happen`; `completed_by` only when `actor` is not the lease
-- holder, worker_id, which it reads as when absent). `actor` is
-- the worker id or nil. Returns {1, job as a flat HGETALL array} completed
-- ({1} unless `want_job`), {0, current token, status} refused (nothing
-- written: the progress is fenced with the ack), {-1} no such job.
local function complete_job(op, actor, id, token, result, progress, want_job)
  local job = P .. 'job:' .. id
  local f = redis.call('HMGET', job, 'status', 'lease_token', 'queue', 'run', 'name', 'has_children', 'counted',
    'worker_id', 'error', 'started_at')
  local old = tonumber(f[1])
  if not old then
    return {-1}
  elseif not op.sources[old] or (tonumber(f[2]) or 0) ~= token then
    return {0, f[2] or '0', f[1]}
  end
  move(id, f[3], old, op.target, f[5])
  -- the table's clears are deleted only when there (most acks have no error to drop)
  local present = {error = f[9] and true or nil}
  local set = {'result', result}
  if progress then
    set[3], set[4] = 'progress', string.sub(progress, 1, -2) .. ',"at":' .. now_text .. '}'
  end
  if f[4] == RUN_CLAIMED then
    set[#set + 1], set[#set + 2] = 'run', RUN_COMPLETED
    if actor ~= f[8] then  -- the lease holder's ack leaves it out: it is worker_id
      set[#set + 1], set[#set + 2] = 'completed_by', actor or ''
    end
    change(id, op, op.target, set, nil, present)
    happen(id, op.event, old, op.target, actor, token)
  else  -- claimed by a version that appended its claimed event
    change(id, op, op.target, set, nil, present)
    append_event(id, op.event, old, op.target, actor, token, nil)
  end
  redis.call('ZREM', P .. 'leases', id)
  if f[7] then  -- a job of a limited queue leaves its running count (lib/flow.lua)
    flow.left(id, f[3], f[7])
  end
  if f[6] then  -- its waiting children are released or canceled (lib/flow.lua)
    flow.finished(id, op.target, actor)
  end
  count_history(f[3], op.event)
  count_handler(f[5], HM.succeeded, f[10] and now - tonumber(f[10]))
  if want_job then
    return {1, redis.call('HGETALL', job)}
  end
  return {1}
end
