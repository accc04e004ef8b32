-- lib/dependencies.lua: jobs that wait for others: a parent that ends releases or cancels its waiting children (store.flow_rules.on_parent_finished, and the cascade); a section of the library's top level after
-- lib/flow.lua, whose table `flow` it extends (store/redis/scripts.py
-- SECTIONS; docs/architecture.md, Flow control). No per-call state.
--
-- KEYS: none of its own (KEYS[1] is the prefix, lib/keys.lua).
-- ARGV: none of its own.
-- Keys (store/redis/keys.py): children:<id>, waiting:<id>, remote_waiting:<id>, outbox,
-- parents:<id>, wakeup:<queue>, and the job keys lib/job.lua writes.
-- Returns: nothing. Defines `flow.finished`, `flow.settle`, `flow.waits_on`
-- (store.flow_rules.child_status_at_enqueue), `flow.keeps`.

local S = FLOW.status

-- store.flow_rules.on_parent_finished: a parent of a child (status `status`,
-- `pending` unfinished parents, `policy` 'cancel' or 'run') ended `outcome`.
-- Returns nil when the child no longer waits, else its pending count after,
-- its new status (nil: it keeps waiting) and the reason of a cancel.
function flow.on_parent_finished(status, pending, parent, outcome, policy)
  if status ~= S.Scheduled or pending <= 0 then
    return nil
  end
  local left = pending - 1
  if outcome ~= S.Completed and policy ~= 'run' then
    return left, S.Canceled, 'parent ' .. parent .. ' ended ' .. FLOW.name[outcome]
  end
  if left == 0 then
    return left, S.Queued
  end
  return left, nil
end

-- store.flow_rules.child_status_at_enqueue: a new child's pending count, status
-- and reason from its parents' statuses `found` ({{id, status}, ...} sorted by id).
function flow.waits_on(found, policy)
  local pending = 0
  for _, p in ipairs(found) do
    local status = p[2]
    if (status == S.Failed or status == S.Canceled) and policy ~= 'run' then
      return 0, S.Canceled, 'parent ' .. p[1] .. ' is ' .. FLOW.name[status]
    end
    if status ~= S.Completed and status ~= S.Failed and status ~= S.Canceled then
      pending = pending + 1
    end
  end
  if pending > 0 then
    return pending, S.Scheduled
  end
  return 0, S.Queued
end

-- Make waiting child `id` (fields `f`: status, pending_parents,
-- on_parent_failure, queue, rank, lease_token, has_children, priority,
-- limit_key) due
-- now: UNBLOCK's row of the lifecycle table.
local function unblock(id, f, message, actor)
  local op, queue = OPERATIONS['unblock'], f[4]
  local member = rank(f[8] or 0, now, id)
  unqueue(f[5], queue)
  move(id, queue, tonumber(f[1]), op.target)
  change(id, op, op.target, {'pending_parents', 0, 'rank', member})
  ready_add(queue, member, f[9])
  append_event(id, op.event, tonumber(f[1]), op.target, actor, tonumber(f[6]) or 0, message)
  local wakeup = P .. 'wakeup:' .. queue
  if redis.call('RPUSH', wakeup, member) > FLOW.wakeup_kept then
    redis.call('LTRIM', wakeup, -math.floor(FLOW.wakeup_kept / 2), -1)
  end
end

-- Cancel waiting child `id` (fields as `unblock`'s): CANCEL's row, the
-- reason as its error (type ParentFailed) and event message.
local function cancel_child(id, f, left, reason, actor)
  local op = OPERATIONS['cancel']
  local err = cjson.encode({type = 'ParentFailed', message = reason, traceback = cjson.null})
  settle(id)
  unqueue(f[5], f[4])
  move(id, f[4], tonumber(f[1]), op.target)
  change(id, op, op.target, {'pending_parents', left, 'error', err}, {'rank'})
  append_event(id, op.event, tonumber(f[1]), op.target, actor, tonumber(f[6]) or 0, reason)
end

-- Apply flow.on_parent_finished to waiting child `child` of `parent`,
-- which ended `ended`: release it, cancel it, or count one parent less.
-- True when it was canceled and has children of its own (the cascade).
function flow.settle(child, parent, ended, actor)
  local f = redis.call('HMGET', P .. 'job:' .. child, 'status', 'pending_parents', 'on_parent_failure',
    'queue', 'rank', 'lease_token', 'has_children', 'priority', 'limit_key')
  local status = tonumber(f[1])
  if not status then
    return false
  end
  local left, to, reason = flow.on_parent_finished(status, tonumber(f[2]) or 0, parent, ended, f[3])
  if left and to == S.Queued then
    unblock(child, f, 'parent ' .. parent .. ' ended ' .. FLOW.name[ended], actor)
  elseif left and to == S.Canceled then
    cancel_child(child, f, left, reason, actor)
    return f[7] ~= false and f[7] ~= nil
  elseif left then
    redis.call('HSET', P .. 'job:' .. child, 'pending_parents', left)
  end
  return false
end

-- Parent `id` ended `outcome` (Completed, Failed or Canceled): settle each
-- child still waiting for it (waiting:<id>, emptied: a parent ends once for
-- its children), in this call; a child canceled by it passes the cancel on
-- to its own children. A child on another shard (remote_waiting:<id>,
-- store/redis/shards/) gets an entry in this shard's outbox, which the store
-- applies on the child's shard (lua/parent_done.lua). `actor` is the worker
-- or operator whose change ended the parent.
function flow.finished(id, outcome, actor)
  local work, i = {{id, outcome}}, 1
  while i <= #work do
    local parent, ended = work[i][1], work[i][2]
    i = i + 1
    local waiting = P .. 'waiting:' .. parent
    local children = redis.call('SMEMBERS', waiting)
    redis.call('DEL', waiting)
    table.sort(children)
    for _, child in ipairs(children) do
      if flow.settle(child, parent, ended, actor) then
        work[#work + 1] = {child, S.Canceled}
      end
    end
    local remote = P .. 'remote_waiting:' .. parent
    local others = redis.call('SMEMBERS', remote)
    if #others > 0 then
      redis.call('DEL', remote)
      table.sort(others)
      for _, child in ipairs(others) do
        redis.call('RPUSH', P .. 'outbox', cjson.encode({child, parent, ended, actor or ''}))
      end
    end
  end
end

-- True when job `id` (with `has_children` set) must stay: a child of it
-- still waits (Scheduled with unfinished parents), and will read its result.
function flow.keeps(id)
  for _, child in ipairs(redis.call('SMEMBERS', P .. 'children:' .. id)) do
    local f = redis.call('HMGET', P .. 'job:' .. child, 'status', 'pending_parents')
    if tonumber(f[1]) == S.Scheduled and (tonumber(f[2]) or 0) > 0 then
      return true
    end
  end
  return false
end
