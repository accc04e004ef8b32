-- lib/flow.lua: flow control (docs/architecture.md, Flow control), a section
-- of the library's top level after lib/job.lua (store/redis/scripts.py). It
-- has no per-call state: every function of the library may call it, and a
-- job or queue that uses no flow control never reaches it (the claim reads
-- one hash field a queue, the acks one job field more).
--
-- KEYS: none of its own (KEYS[1] is the prefix, lib/keys.lua).
-- ARGV: none of its own.
-- Keys (store/redis/keys.py): limits, running, running_keys:<queue>,
-- starts:<queue>, key_starts:<queue>\0<limit key>, rate_keys:<queue>, scan_from,
-- children:<id>, waiting:<id>, parents:<id>, wakeup:<queue>, and the job keys
-- lib/job.lua writes.
-- Returns: nothing. Defines the table `flow`: `limits`, `hold`, `admit`
-- (store.flow.hold and admit, ported: the same decision, tested on the same
-- cases), `usage`, `claim_queue`, `left`, `recount`, `finished`
-- (store.flow.on_parent_finished and the cascade), `waits_on`
-- (store.flow.child_status_at_enqueue), `keeps`.
-- FLOW (compiled from store.flow and store.lifecycle by scripts.py): status
-- codes by name, names by code, WAITING_DUE_AT, WAKEUP_KEPT.

local flow = {}

-- The limits of `queue` (the JSON of QueueLimits.to_json without nulls, in
-- the limits hash), or nil when it has none: one HGET.
function flow.limits(queue)
  local text = redis.call('HGET', P .. 'limits', queue)
  if not text then
    return nil
  end
  return cjson.decode(text)
end

-- store.flow.hold: the kind of limit holding a job of limit key `key`
-- (false: none) under limits `L` and usage `U` (running, running_by_key,
-- starts, first_start, starts_by_key {key = {n, first}}), or nil.
function flow.hold(key, L, U)
  if L.concurrency and U.running >= L.concurrency then
    return 'concurrency'
  end
  if key and L.per_key_concurrency and (U.running_by_key[key] or 0) >= L.per_key_concurrency then
    return 'per_key_concurrency'
  end
  if L.rate and U.starts >= L.rate.limit then
    return 'rate'
  end
  if key and L.per_key_rate then
    local s = U.starts_by_key[key]
    if s and s[1] >= L.per_key_rate.limit then
      return 'per_key_rate'
    end
  end
  return nil
end

-- store.flow.admit: which `candidates` ({{member, key or false}, ...} in claim
-- order) a claim leases at `now`, at most `wanted`; `U` counts the admitted.
-- Returns the admitted candidates, the seconds until a rate limit that held
-- one reopens (nil: none held), and true when a queue-wide limit stopped the walk.
function flow.admit(candidates, L, U, now, wanted)
  local admitted, retry, stopped = {}, nil, false
  for _, c in ipairs(candidates) do
    if #admitted >= wanted then
      break
    end
    local key = c[2]
    local kind = flow.hold(key, L, U)
    if kind == 'concurrency' then
      stopped = true
      break
    elseif kind == 'rate' or kind == 'per_key_rate' then
      local rate, first = L.rate, U.first_start
      if kind == 'per_key_rate' then
        rate, first = L.per_key_rate, (U.starts_by_key[key] or {0, now})[2]
      end
      local wait = 0
      if first then
        wait = math.max(0, first + rate.period_s - now)
      end
      if not retry or wait < retry then
        retry = wait
      end
      if kind == 'rate' then
        stopped = true
        break
      end
    elseif not kind then
      admitted[#admitted + 1] = c
      U.running, U.starts = U.running + 1, U.starts + 1
      U.first_start = U.first_start or now
      if key then
        U.running_by_key[key] = (U.running_by_key[key] or 0) + 1
        local s = U.starts_by_key[key]
        if s then
          s[1] = s[1] + 1
        else
          U.starts_by_key[key] = {1, now}
        end
      end
    end
  end
  return admitted, retry, stopped
end

-- The starts of `queue` (of its limit key `key` when given) in a sliding
-- window: those at or before now - `period_s` pruned, then (count, oldest
-- start or nil).
local function window(queue, key, period_s)
  local zset = P .. 'starts:' .. queue
  if key then
    zset = P .. 'key_starts:' .. queue .. '\0' .. key
  end
  redis.call('ZREMRANGEBYSCORE', zset, '-inf', fmt(now - period_s))
  local first = redis.call('ZRANGE', zset, 0, 0, 'WITHSCORES')
  if #first == 0 then
    return 0, nil
  end
  return redis.call('ZCARD', zset), tonumber(first[2])
end

-- The usage of `queue` under `L` at now: running jobs and starts in the
-- rate window; per-key figures are loaded by `load_keys`.
function flow.usage(queue, L)
  local U = {running = tonumber(redis.call('HGET', P .. 'running', queue) or '0'), running_by_key = {},
    starts = 0, first_start = nil, starts_by_key = {}, loaded = {}}
  if L.rate then
    U.starts, U.first_start = window(queue, nil, L.rate.period_s)
  end
  return U
end

-- Load the per-key usage of the keys of `candidates` not loaded yet.
function flow.load_keys(U, queue, L, candidates)
  for _, c in ipairs(candidates) do
    local key = c[2]
    if key and not U.loaded[key] then
      U.loaded[key] = true
      if L.per_key_concurrency then
        U.running_by_key[key] = tonumber(redis.call('HGET', P .. 'running_keys:' .. queue, key) or '0')
      end
      if L.per_key_rate then
        local n, first = window(queue, key, L.per_key_rate.period_s)
        if n > 0 then
          U.starts_by_key[key] = {n, first}
        end
      end
    end
  end
end

-- Most ready members one limited claim reads beyond its first page (a bound
-- on its cost when per-key limits hold the head of the queue); the walk
-- goes on from where the last one stopped (scan_from), so every member is
-- read within ceil(depth / SCAN_MOST) claims (docs/architecture.md, Flow control).
local SCAN_MOST = 1000

-- Record a leased job of a limited queue: running counts (the job's
-- `counted` field says which: 'q' the queue's, 'k' the queue's and its
-- key's) and its start in the rate windows (each key expires after its window).
local function started(id, queue, key, L, token)
  redis.call('HINCRBY', P .. 'running', queue, 1)
  local counted = 'q'
  if key and (L.per_key_concurrency or L.per_key_rate) then
    redis.call('HINCRBY', P .. 'running_keys:' .. queue, key, 1)
    counted = 'k'
  end
  redis.call('HSET', P .. 'job:' .. id, 'counted', counted)
  local member = id .. ':' .. token
  if L.rate then
    local window_key = P .. 'starts:' .. queue
    redis.call('ZADD', window_key, now_text, member)
    redis.call('PEXPIRE', window_key, math.ceil(L.rate.period_s * 1000) + 1000)
  end
  if key and L.per_key_rate then
    local ms = math.ceil(L.per_key_rate.period_s * 1000) + 1000
    local by_key, keys = P .. 'key_starts:' .. queue .. '\0' .. key, P .. 'rate_keys:' .. queue
    redis.call('ZADD', by_key, now_text, member)
    redis.call('PEXPIRE', by_key, ms)
    redis.call('ZADD', keys, now_text, key)
    redis.call('PEXPIRE', keys, ms)
  end
end

-- Claim up to `wanted` jobs of limited `queue` (limits `L`): walk its ready
-- members in claim order, page by page, admitting by `flow.admit`; `lease`
-- (member, queue) leases one and returns its id and token, or nil. The
-- first page is read from the head (new urgent jobs first); the rest of the
-- walk, at most SCAN_MOST members, from the member the previous claim's
-- walk stopped at (scan_from) when that is further on, back to the head
-- once it reached the end. Returns how many were leased and the rate
-- limit's retry-after (or nil).
function flow.claim_queue(queue, L, wanted, lease)
  local U = flow.usage(queue, L)
  local ready, page = P .. 'ready:' .. queue, wanted * 4 + 16
  local keyed = L.per_key_concurrency or L.per_key_rate
  local got, retry, read, after = 0, nil, 0, nil
  local resumed = false
  while got < wanted and read < SCAN_MOST + page do
    local members
    if after then
      members = redis.call('ZRANGE', ready, '(' .. after, '+', 'BYLEX', 'LIMIT', 0, page)
    else
      members = redis.call('ZRANGE', ready, 0, page - 1)
    end
    read = read + #members
    local candidates = {}
    for i, member in ipairs(members) do
      local key = false
      if keyed then
        -- the id follows the rank's 24 digits and ':' (store/redis/keys.py RANK_HEAD)
        key = redis.call('HGET', P .. 'job:' .. string.sub(member, 26), 'limit_key') or false
      end
      candidates[i] = {member, key}
    end
    flow.load_keys(U, queue, L, candidates)
    local admitted, wait, stopped = flow.admit(candidates, L, U, now, wanted - got)
    for _, c in ipairs(admitted) do
      local id, token = lease(c[1], queue)
      if id then
        got = got + 1
        started(id, queue, c[2] or nil, L, token)
      end
    end
    if wait and (not retry or wait < retry) then
      retry = wait
    end
    if stopped or got >= wanted then
      return got, retry
    end
    if #members < page then  -- the end: the next claim's walk starts again after the head
      if keyed then
        redis.call('HDEL', P .. 'scan_from', queue)
      end
      return got, retry
    end
    after = members[#members]
    if not resumed then
      resumed = true
      local from = keyed and redis.call('HGET', P .. 'scan_from', queue)
      if from and from > after then
        after = from
      end
    end
  end
  if keyed and after then
    redis.call('HSET', P .. 'scan_from', queue, after)
  end
  return got, retry
end

-- A job counted in its queue's running jobs (its `counted` field, read by
-- the caller) left InProgress: uncount it.
function flow.left(id, queue, counted)
  local job = P .. 'job:' .. id
  if redis.call('HINCRBY', P .. 'running', queue, -1) <= 0 then
    redis.call('HDEL', P .. 'running', queue)
  end
  if counted == 'k' then
    local key = redis.call('HGET', job, 'limit_key')
    local by = P .. 'running_keys:' .. queue
    if key and redis.call('HINCRBY', by, key, -1) <= 0 then
      redis.call('HDEL', by, key)
    end
  end
  redis.call('HDEL', job, 'counted')
end

-- Count again the InProgress jobs of `queue` (the leases zset: jobs in
-- flight) under its new limits `L` (nil: none; every mark removed), so a
-- limit set while jobs run counts them. Returns how many run.
function flow.recount(queue, L)
  redis.call('HDEL', P .. 'running', queue)
  redis.call('DEL', P .. 'running_keys:' .. queue)
  local n = 0
  for _, id in ipairs(redis.call('ZRANGE', P .. 'leases', 0, -1)) do
    local job = P .. 'job:' .. id
    local f = redis.call('HMGET', job, 'queue', 'limit_key', 'counted')
    if f[1] == queue then
      if L then
        local counted = 'q'
        redis.call('HINCRBY', P .. 'running', queue, 1)
        if f[2] and (L.per_key_concurrency or L.per_key_rate) then
          redis.call('HINCRBY', P .. 'running_keys:' .. queue, f[2], 1)
          counted = 'k'
        end
        redis.call('HSET', job, 'counted', counted)
        n = n + 1
      elseif f[3] then
        redis.call('HDEL', job, 'counted')
      end
    end
  end
  return n
end

-- ------------------------------------------------------------ dependencies
local S = FLOW.status

-- store.flow.on_parent_finished: a parent of a child (status `status`,
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

-- store.flow.child_status_at_enqueue: a new child's pending count, status
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
-- on_parent_failure, queue, rank, lease_token, has_children, priority) due
-- now: UNBLOCK's row of the lifecycle table.
local function unblock(id, f, message, actor)
  local op, queue = OPERATIONS['unblock'], f[4]
  local member = rank(f[8] or 0, now, id)
  unqueue(f[5], queue)
  move(id, queue, tonumber(f[1]), op.target)
  change(id, op, op.target, {'pending_parents', 0, 'rank', member})
  redis.call('ZADD', P .. 'ready:' .. queue, 0, member)
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

-- Parent `id` ended `outcome` (Completed, Failed or Canceled): apply
-- flow.on_parent_finished to each child still waiting for it (waiting:<id>,
-- emptied: a parent ends once for its children), in this call; a child
-- canceled by it passes the cancel on to its own children. `actor` is
-- the worker or operator whose change ended the parent.
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
      local f = redis.call('HMGET', P .. 'job:' .. child, 'status', 'pending_parents', 'on_parent_failure',
        'queue', 'rank', 'lease_token', 'has_children', 'priority')
      local status = tonumber(f[1])
      if status then
        local left, to, reason = flow.on_parent_finished(status, tonumber(f[2]) or 0, parent, ended, f[3])
        local message = 'parent ' .. parent .. ' ended ' .. FLOW.name[ended]
        if left and to == S.Queued then
          unblock(child, f, message, actor)
        elseif left and to == S.Canceled then
          cancel_child(child, f, left, reason, actor)
          if f[7] then
            work[#work + 1] = {child, S.Canceled}
          end
        elseif left then
          redis.call('HSET', P .. 'job:' .. child, 'pending_parents', left)
        end
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
