-- lib/flow_keyed.lua: the claim of a queue with per-key limits, which finds
-- an admissible job of a limit key at any depth of the ready set; a section
-- of the library's top level after lib/flow_claim.lua, whose table `flow`
-- it extends (store/redis/scripts.py SECTIONS; docs/architecture.md, Flow
-- control). No per-call state.
--
-- KEYS: none of its own (KEYS[1] is the prefix, lib/keys.lua).
-- ARGV: none of its own.
-- Keys (store/redis/keys.py): key_heads:<queue>, key_ready:<queue>\0<limit key>,
-- keyed:<queue>, ready:<queue>, job:<id> (limit_key, read), and what
-- lib/flow_claim.lua `flow.take` writes.
-- Returns: nothing. Defines `flow.claim_keyed`.

-- The job id of ready member `member` (after the rank's 24 digits and ':',
-- store/redis/keys.py RANK_HEAD) and its limit key (false: none).
local function member_key(member)
  return redis.call('HGET', P .. 'job:' .. string.sub(member, 26), 'limit_key') or false
end

-- The candidates of limit keys: key_heads:<queue> walked in head order
-- (lib/ready.lua), each key's usage loaded; a key a per-key limit holds
-- gives its head alone (admit skips it and counts a rate's retry-after; such
-- keys are at most those with running jobs or starts in the window), an
-- open key its first members, as many as its limits let start (at most
-- `wanted`), until `wanted` open keys are found or a queue-wide limit holds.
-- Appends {member, key, open} to `out`.
local function key_candidates(queue, L, U, wanted, out)
  local heads, page, from, open = P .. 'key_heads:' .. queue, wanted + 16, 0, 0
  while true do
    local got = redis.call('ZRANGE', heads, from, from + page - 1)
    for _, head in ipairs(got) do
      local key = member_key(head)
      if key then
        flow.load_keys(U, queue, L, {{head, key}})
        local kind = flow.hold(key, L, U)
        if kind then
          out[#out + 1] = {head, key, false}
          if kind == 'concurrency' or kind == 'rate' then
            return
          end
        else
          local room = wanted
          if L.per_key_concurrency then
            room = math.min(room, L.per_key_concurrency - (U.running_by_key[key] or 0))
          end
          if L.per_key_rate then
            local s = U.starts_by_key[key]
            room = math.min(room, L.per_key_rate.limit - (s and s[1] or 0))
          end
          if room <= 1 then
            out[#out + 1] = {head, key, true}
          else
            local set = P .. 'key_ready:' .. queue .. '\0' .. key
            for _, member in ipairs(redis.call('ZRANGE', set, 0, room - 1)) do
              out[#out + 1] = {member, key, true}
            end
          end
          open = open + 1
          if open >= wanted then
            return
          end
        end
      end
    end
    if #got < page then
      return
    end
    from = from + page
  end
end

-- The candidates without a limit key, in claim order, at most `wanted`, none
-- past `bound` (nil: no bound). keyed:<queue> holds the ready members with a
-- key, so the members without one among the first i + 1 of ready:<queue>
-- number i + 1 - ZLEXCOUNT(keyed, up to the i-th): the next one is the
-- member at `at` when it has no key (ZSCORE; the usual case), else found by a
-- binary search on that count (2 log2(depth) reads, at any depth). Each
-- one's limit key is read: a member with a key that is not in keyed (made
-- ready by a process of layout 6 during a rolling upgrade) is admitted by
-- its key and added to its key's set after the walk.
local function unkeyed_candidates(queue, wanted, bound, out)
  local ready, keyed = P .. 'ready:' .. queue, P .. 'keyed:' .. queue
  local total = redis.call('ZCARD', ready)
  local left = total - redis.call('ZCARD', keyed)
  local at, stale = 0, {}
  for j = 1, math.min(wanted, left) do
    local member = redis.call('ZRANGE', ready, at, at)[1]
    if redis.call('ZSCORE', keyed, member) then
      local lo, hi = at + 1, total - 1  -- the j-th is in [lo, hi]: j <= left
      while lo < hi do
        local mid = math.floor((lo + hi) / 2)
        local m = redis.call('ZRANGE', ready, mid, mid)[1]
        if mid + 1 - redis.call('ZLEXCOUNT', keyed, '-', '[' .. m) >= j then
          hi = mid
        else
          lo = mid + 1
        end
      end
      at = lo
      member = redis.call('ZRANGE', ready, at, at)[1]
    end
    if bound and member > bound then
      break
    end
    local key = member_key(member)
    out[#out + 1] = {member, key, false}
    if key then  -- not in its key's set: a layout-6 process made it ready
      stale[#stale + 1] = {key, member}
    end
    at = at + 1
  end
  for _, s in ipairs(stale) do
    keyed_add(queue, s[1], s[2])
  end
end

-- Claim up to `wanted` jobs of `queue`, whose limits `L` have a per-key
-- limit (`lease` as lib/flow_claim.lua `flow.claim_queue`'s): the candidates
-- of limit keys and those without one, merged in claim order (byte order of
-- the members), admitted and leased by `flow.take`. The first `wanted` open
-- candidates bound what the walk without keys reads: a job past them would
-- not be taken. Returns how many were leased and the rate limit's
-- retry-after (or nil).
function flow.claim_keyed(queue, L, wanted, lease)
  local U = flow.usage(queue, L)
  if L.concurrency and U.running >= L.concurrency then
    return 0, nil  -- the queue is full: nothing to read (admit would stop at once)
  end
  local candidates = {}
  key_candidates(queue, L, U, wanted, candidates)
  table.sort(candidates, function(a, b) return a[1] < b[1] end)
  local bound, open = nil, 0
  for _, c in ipairs(candidates) do
    if c[3] then
      open = open + 1
      if open == wanted then
        bound = c[1]
        break
      end
    end
  end
  local n = #candidates
  unkeyed_candidates(queue, wanted, bound, candidates)
  if #candidates > n then
    table.sort(candidates, function(a, b) return a[1] < b[1] end)
  end
  local got, retry = flow.take(queue, L, U, candidates, wanted, lease)
  return got, retry
end
