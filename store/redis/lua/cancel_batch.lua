-- cancel_batch: an operator cancels a batch: every job of it not finished
-- (InProgress ones too: their leases are revoked, their acks refused) and its
-- callback, by CANCEL's row of the lifecycle table; then the children waiting
-- for any of them (lib/flow.lua `flow.finished`), all in this call. Each job's
-- canceled event goes to its list; the audit log gets one entry, the batch's.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: batch:<id>,
--              batch_jobs:<id>, job:<id>, events:<id>, ready:<queue>,
--              scheduled:<queue>, leases, running, counters, audit_log, updated
--              and listing zsets
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      operation name, 'cancel': its row of the lifecycle table compiled into
--              the library (lib/job.lua `operation`)
-- ARGV[5]      batch id
-- ARGV[6]      actor
-- ARGV[7]      message of each job's canceled event
-- ARGV[8]      event kind of the batch's audit entry (EventKind.BATCH_CANCELED)
-- Returns:     {1, jobs canceled} or {-1} no such batch
--
-- @include lib/clock.lua
-- @include lib/job.lua

local op = operation(ARGV[4])
local batch, actor = ARGV[5], none(ARGV[6])
local b = redis.call('HMGET', P .. 'batch:' .. batch, 'id', 'callback_job_id')
if not b[1] then
  return {-1}
end
local ids = redis.call('LRANGE', P .. 'batch_jobs:' .. batch, 0, -1)
if none(b[2] or '') then
  ids[#ids + 1] = b[2]
end
local S = FLOW.status
local parents, n = {}, 0
for _, id in ipairs(ids) do
  local f = redis.call('HMGET', P .. 'job:' .. id, 'status', 'lease_token', 'queue', 'rank', 'counted',
    'has_children')
  local old = tonumber(f[1])
  if old and op.sources[old] and old ~= S.Completed and old ~= S.Failed then
    settle(id)
    unqueue(f[4], f[3])
    move(id, f[3], old, op.target)
    change(id, op, op.target, nil, {'rank'})
    redis.call('ZREM', P .. 'leases', id)
    -- the job's event, counted; the audit log gets the batch's one entry
    local events = P .. 'events:' .. id
    local event = new_event(op.event, old, op.target, actor, tonumber(f[2]) or 0, ARGV[7])
    local kept = events_kept()
    if redis.call('RPUSH', events, encode_event(event)) > kept then
      redis.call('LTRIM', events, -kept, -1)
    end
    count(event_counter(op.event), 1)
    if f[5] then
      flow.left(id, f[3], f[5])
    end
    if f[6] then
      parents[#parents + 1] = id
    end
    n = n + 1
  end
end
for _, id in ipairs(parents) do
  flow.finished(id, op.target, actor)
end
redis.call('HSET', P .. 'batch:' .. batch, 'canceled_at', now_text, 'canceled_by', actor or '')
audit_event('', ARGV[8], nil, nil, actor, nil, 'batch ' .. batch .. ': ' .. n .. ' jobs')
flush_counts()
return {1, n}
