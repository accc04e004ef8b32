-- lib/flow_claim.lua: the claim of a queue with limits: walk its ready set from where the last claim stopped, admit by the limits, count what starts; a section of the library's top level after
-- lib/flow.lua, whose table `flow` it extends (store/redis/scripts.py
-- SECTIONS; docs/architecture.md, Flow control). No per-call state.
--
-- KEYS: none of its own (KEYS[1] is the prefix, lib/keys.lua).
-- ARGV: none of its own.
-- Keys (store/redis/keys.py): ready:<queue>, scan_from, running, running_keys:<queue>, starts:<queue>, key_starts:<queue>\0<limit key>, rate_keys:<queue>, leases.
-- Returns: nothing. Defines `flow.claim_queue`, `flow.left`, `flow.recount`.

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
