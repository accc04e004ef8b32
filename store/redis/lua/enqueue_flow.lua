-- enqueue_flow: add jobs that use flow control (a limit key, parents, a
-- batch or chain), all or none, each child's status decided from its
-- parents' (lib/flow.lua `flow.waits_on`: store.flow_rules.child_status_at_enqueue);
-- jobs without them go through enqueue.lua, which never reads these.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: per job job:<id>,
--              ready:<queue> or scheduled:<queue>, wakeup:<queue>, parents:<id>,
--              and of each parent children:<id>, waiting:<id>; batch:<id>,
--              batch_jobs:<id>; idempotency, counters, history, listing zsets
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      event kind of each new job's first event (EventKind.ENQUEUED)
-- ARGV[5]      batch id ('' for none): the batch record is written with the jobs
-- ARGV[6]      batch kind ('batch' or 'chain')
-- ARGV[7]      the batch's callback job id ('' for none)
-- ARGV[8..]    one JSON object per job, in order: {"f": the hash fields of
--              store/redis/codec.py spec_fields and flow_fields, "d": delay s,
--              "p": [parent ids, sorted, each enqueued before or earlier here],
--              "r": {parent id: status} (optional) parents on other shards of a
--              sharded store, linked there first (lua/link_children.lua): not
--              looked up here; how one ended since is in parent_done:<id>}
-- A child with an unfinished parent is Scheduled, due_at = now +
-- WAITING_DUE_AT (never due by time), in no ready or scheduled zset, with
-- `pending_parents`; it is in children:<p> of each parent and waiting:<p> of
-- each unfinished one (whose `has_children` is set), its parents in parents:<id>.
-- One canceled at enqueue (a failed parent, policy cancel) has its reason as
-- error (type ParentFailed). A batch's jobs (field batch_id) are listed in
-- batch_jobs:<id>, in order.
-- Returns:     {'ok', flat HGETALL of the first job} written,
--              {'duplicate', key, id} an idempotency key is taken (nothing written),
--              {'missing', id} a parent does not exist (nothing written)
--
-- @include lib/clock.lua
-- @include lib/job.lua

local S = FLOW.status
local specs, ids, parent_here = {}, {}, {}
for i = 8, #ARGV do
  local spec = cjson.decode(ARGV[i])
  specs[#specs + 1] = spec
  ids[spec.f.id] = true
end
for _, spec in ipairs(specs) do
  for _, parent in ipairs(spec.p) do
    if ids[parent] then
      parent_here[parent] = true  -- written with has_children set (a batch, a chain)
    end
  end
end
for _, spec in ipairs(specs) do
  local key = spec.f.idempotency_key
  if key then
    local existing = redis.call('HGET', P .. 'idempotency', key)
    if existing then
      return {'duplicate', key, existing}
    end
  end
  for _, parent in ipairs(spec.p) do
    if not ids[parent] and not (spec.r and spec.r[parent]) and redis.call('EXISTS', P .. 'job:' .. parent) == 0 then
      return {'missing', parent}
    end
  end
end

local ready, written = {}, {}  -- written: status of each job of this call
for _, spec in ipairs(specs) do
  local f = spec.f
  local id, queue = f.id, f.queue
  local found, remote = {}, spec.r or {}
  for i, parent in ipairs(spec.p) do
    if remote[parent] then  -- on another shard: its status when linked, or how it ended since
      local ended = redis.call('HGET', P .. 'parent_done:' .. id, parent)
      found[i] = {parent, tonumber(ended or remote[parent])}
    else
      found[i] = {parent, written[parent] or tonumber(redis.call('HGET', P .. 'job:' .. parent, 'status'))}
    end
  end
  local pending, status, reason = flow.waits_on(found, f.on_parent_failure)
  local due = now + tonumber(spec.d)
  if status == S.Queued and tonumber(spec.d) > 0 then
    status = S.Scheduled
  end
  local hash = {'status', status, 'created_at', now_text, 'last_updated_at', now_text, 'enqueued_as', status}
  for field, value in pairs(f) do
    hash[#hash + 1] = field
    hash[#hash + 1] = value
  end
  if #spec.p > 0 then
    hash[#hash + 1] = 'pending_parents'
    hash[#hash + 1] = pending
  end
  if parent_here[id] then
    hash[#hash + 1] = 'has_children'
    hash[#hash + 1] = 1
  end
  if status == S.Canceled then
    local err = cjson.encode({type = 'ParentFailed', message = reason, traceback = cjson.null})
    for _, v in ipairs({'due_at', now_text, 'completed_at', now_text, 'error', err}) do
      hash[#hash + 1] = v
    end
  elseif pending > 0 then
    hash[#hash + 1] = 'due_at'
    hash[#hash + 1] = fmt(now + FLOW.waiting_due_at)
  else
    local member = rank(f.priority, due, id)
    for _, v in ipairs({'due_at', fmt(due), 'rank', member}) do
      hash[#hash + 1] = v
    end
    if status == S.Scheduled then
      hash[#hash + 1] = 'retry_delay_until'
      hash[#hash + 1] = fmt(due)
      redis.call('ZADD', P .. 'scheduled:' .. queue, due, member)
    else
      ready_add(queue, member, f.limit_key)
      ready[queue] = ready[queue] == nil and member or '*'
    end
  end
  redis.call('HSET', P .. 'job:' .. id, unpack(hash))
  written[id] = status
  for i = 1, #spec.p, 1000 do  -- parents:<id> 1,000 members a call
    redis.call('SADD', P .. 'parents:' .. id, unpack(spec.p, i, math.min(i + 999, #spec.p)))
  end
  for i, parent in ipairs(spec.p) do
    local st = found[i][2]
    local unfinished = pending > 0 and st ~= S.Completed and st ~= S.Failed and st ~= S.Canceled
    if remote[parent] then  -- linked on its shard (lua/link_children.lua); its end comes by lua/parent_done.lua
      if unfinished then
        redis.call('SADD', P .. 'remote_pending:' .. id, parent)
      end
    else
      redis.call('SADD', P .. 'children:' .. parent, id)
      if unfinished then
        redis.call('SADD', P .. 'waiting:' .. parent, id)
        if not parent_here[parent] then
          redis.call('HSET', P .. 'job:' .. parent, 'has_children', 1)
        end
      end
    end
  end
  if spec.r then
    redis.call('DEL', P .. 'parent_done:' .. id)
  end
  if f.idempotency_key then
    redis.call('HSET', P .. 'idempotency', f.idempotency_key, id)
  end
  if f.batch_id then
    redis.call('RPUSH', P .. 'batch_jobs:' .. f.batch_id, id)
  end
  move(id, queue, nil, status, f.name)
  happen(id, ARGV[4], nil, status, nil, 0)
  count_history(queue, ARGV[4])
end
local batch = none(ARGV[5])
if batch then
  local size = redis.call('LLEN', P .. 'batch_jobs:' .. batch)
  redis.call('HSET', P .. 'batch:' .. batch, 'id', batch, 'kind', ARGV[6], 'size', size, 'created_at', now_text,
    'callback_job_id', ARGV[7])
end
flush_counts()
for queue, member in pairs(ready) do
  local wakeup = P .. 'wakeup:' .. queue
  if redis.call('RPUSH', wakeup, member) > FLOW.wakeup_kept then
    redis.call('LTRIM', wakeup, -math.floor(FLOW.wakeup_kept / 2), -1)
  end
end
return {'ok', redis.call('HGETALL', P .. 'job:' .. specs[1].f.id)}
