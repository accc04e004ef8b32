-- lib/flow_claim.lua: the claim of a queue with limits: walk its ready set, admit by the limits, count what starts; a section of the library's top level after
-- lib/flow.lua, whose table `flow` it extends (store/redis/scripts.py
-- SECTIONS; docs/architecture.md, Flow control). No per-call state.
--
-- KEYS: none of its own (KEYS[1] is the prefix, lib/keys.lua).
-- ARGV: none of its own.
-- Keys (store/redis/keys.py): ready:<queue>, running, running_keys:<queue>, starts:<queue>, key_starts:<queue>\0<limit key>, rate_keys:<queue>, leases.
-- Returns: nothing. Defines `flow.claim_queue`, `flow.take`, `flow.left`, `flow.recount`.

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
  -- A start counts in both windows while either rate is set (as the SQL
  -- store's rate_starts rows do): a per-key rate set later counts it too.
  if L.rate or L.per_key_rate then
    local member = id .. ':' .. token
    local longest = math.max(L.rate and L.rate.period_s or 0, L.per_key_rate and L.per_key_rate.period_s or 0)
    local ms = math.ceil(longest * 1000) + 1000
    local window_key = P .. 'starts:' .. queue
    redis.call('ZADD', window_key, now_text, member)
    redis.call('PEXPIRE', window_key, ms)
    if key then
      local by_key, keys = P .. 'key_starts:' .. queue .. '\0' .. key, P .. 'rate_keys:' .. queue
      redis.call('ZADD', by_key, now_text, member)
      redis.call('PEXPIRE', by_key, ms)
      redis.call('ZADD', keys, now_text, key)
      redis.call('PEXPIRE', keys, ms)
    end
  end
end

-- Claim up to `wanted` jobs of limited `queue` (limits `L`): walk its ready
-- members in claim order, page by page, admitting by `flow.admit`; `lease`
-- (member, queue) leases one and returns its id and token, or nil. A queue
-- with per-key limits is claimed by `flow.claim_keyed` (lib/flow_keyed.lua).
-- Without them a limit holds every job alike, so the walk stops at the
-- first held job. Returns how many were leased and the rate limit's
-- retry-after (or nil).
function flow.claim_queue(queue, L, wanted, lease)
  if L.per_key_concurrency or L.per_key_rate then
    return flow.claim_keyed(queue, L, wanted, lease)
  end
  local U = flow.usage(queue, L)
  local ready, page = P .. 'ready:' .. queue, wanted * 4 + 16
  local got, retry, after = 0, nil, nil
  local unread = L.rate ~= nil  -- a start's key goes into the windows too
  while got < wanted do
    local members
    if after then
      members = redis.call('ZRANGE', ready, '(' .. after, '+', 'BYLEX', 'LIMIT', 0, page)
    else
      members = redis.call('ZRANGE', ready, 0, page - 1)
    end
    local candidates = {}
    for i, member in ipairs(members) do
      candidates[i] = {member, false, unread}  -- no per-key limit: the key is read once leased
    end
    local n, wait, stopped = flow.take(queue, L, U, candidates, wanted - got, lease)
    got = got + n
    if wait and (not retry or wait < retry) then
      retry = wait
    end
    if stopped or got >= wanted or #members < page then
      return got, retry
    end
    after = members[#members]
  end
  return got, retry
end

-- Admit `candidates` ({{member, key or false[, true: key not read]}, ...} in claim order) of
-- `queue` by its limits `L` and usage `U`, at most `wanted`, and lease each
-- admitted one (`lease` as `claim_queue`'s), counting its start. Returns how
-- many were leased, the rate limit's retry-after (or nil) and true when a
-- queue-wide limit stopped the walk (`flow.admit`).
function flow.take(queue, L, U, candidates, wanted, lease)
  flow.load_keys(U, queue, L, candidates)
  local admitted, wait, stopped = flow.admit(candidates, L, U, now, wanted)
  local got = 0
  for _, c in ipairs(admitted) do
    local id, token = lease(c[1], queue)
    if id then
      got = got + 1
      local key = c[2] or nil
      if c[3] then
        key = redis.call('HGET', P .. 'job:' .. id, 'limit_key') or nil
      end
      started(id, queue, key, L, token)
    end
  end
  return got, wait, stopped
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
