-- lib/flow.lua: flow control (docs/architecture.md, Flow control), a section
-- of the library's top level after lib/job.lua (store/redis/scripts.py). It
-- has no per-call state: every function of the library may call it, and a
-- job or queue that uses no flow control never reaches it (the claim reads
-- one hash field a queue, the acks one job field more).
--
-- KEYS: none of its own (KEYS[1] is the prefix, lib/keys.lua).
-- ARGV: none of its own.
-- Keys (store/redis/keys.py): limits, running, running_keys:<queue>,
-- starts:<queue>, key_starts:<queue>\0<limit key>, rate_keys:<queue>,
-- children:<id>, waiting:<id>, parents:<id>, wakeup:<queue>, and the job keys
-- lib/job.lua writes.
-- Returns: nothing. Defines the table `flow` and its limits: `limits`,
-- `hold`, `admit` (store.flow_rules.hold and admit, ported: the same decision,
-- tested on the same cases), `usage`. The sections after it add the rest by
-- concept: lib/flow_claim.lua the claim of a limited queue (`claim_queue`,
-- `left`, `recount`), lib/dependencies.lua the jobs that wait for others
-- (`finished`, `waits_on`, `keeps`).
-- FLOW (compiled from store.flow_rules and store.lifecycle by scripts.py): status
-- codes by name, names by code, WAITING_DUE_AT, WAKEUP_KEPT.

local flow = {}

-- A stored count that passes the limits rule (store.flow_rules: an integer in
-- [1, MAX_LIMIT]), else nil.
local function stored_count(value)
  if type(value) == 'number' and value == math.floor(value) and value >= 1 and value <= FLOW.max_limit then
    return value
  end
  return nil
end

-- A stored rate ({limit, period_s}) that passes the rule, else nil.
local function stored_rate(value)
  if type(value) ~= 'table' or not stored_count(value.limit) or type(value.period_s) ~= 'number' then
    return nil
  end
  if value.period_s < FLOW.min_period_s or value.period_s > FLOW.max_period_s then
    return nil
  end
  return value
end

-- The limits of `queue` (the JSON of QueueLimits.to_json without nulls, in
-- the limits hash), or nil when it has none: one HGET. As store.flow_rules
-- stored_limits reads them: a kind whose stored value does not pass the rule
-- (or text that is not JSON) is not applied, so a bad value written by hand
-- or by an older version holds back nothing and breaks no claim.
function flow.limits(queue)
  local text = redis.call('HGET', P .. 'limits', queue)
  if not text then
    return nil
  end
  local ok, stored = pcall(cjson.decode, text)
  if not ok or type(stored) ~= 'table' then
    return nil
  end
  local L = {
    concurrency = stored_count(stored.concurrency),
    per_key_concurrency = stored_count(stored.per_key_concurrency),
    rate = stored_rate(stored.rate),
    per_key_rate = stored_rate(stored.per_key_rate),
  }
  if not (L.concurrency or L.per_key_concurrency or L.rate or L.per_key_rate) then
    return nil
  end
  return L
end

-- store.flow_rules.hold: the kind of limit holding a job of limit key `key`
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

-- store.flow_rules.admit: which `candidates` ({{member, key or false}, ...} in claim
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
