-- lib/claim.lua: the claim, a section of the library's top level after
-- lib/job.lua (store/redis/scripts.py), called by lua/claim.lua and by the
-- ack that claims the next jobs (lua/complete_claim.lua), and the hand-over
-- of new jobs to idle workers (lua/enqueue.lua). Its caller includes
-- lib/clock.lua and lib/job.lua and calls flush_counts().
--
-- KEYS, ARGV: none of its own.
-- Keys written: paused (read), ready:<queue>, scheduled:<queue>, job:<id>,
-- leases, idle:<queue>, hand:<worker>, and what lib/job.lua `move` writes.
-- Returns: nothing. Defines claim_jobs and hand_over.

-- Lease up to `want` due jobs of `queues` (a list of names) to `worker` for
-- `ttl` seconds (a job's own lease_ttl_seconds wins): promote at most
-- `promote` due scheduled jobs to ready per queue, skip paused queues, take
-- the heads of the ready zsets in claim order (priority descending, then
-- oldest due, then id: the byte order of the ready members, lib/job.lua
-- `rank`, merged across queues), lease each; or only the ready member
-- `notified` of queues[1] (a wake-up notice names it) when not nil.
-- A promoted job stays Scheduled until claimed. A member is leased only when
-- ZREM of it returns 1 (a notice may name a job another worker took);
-- lease_token goes up by one at every claim, and the lease (worker_id,
-- lease_token, lease_expires_at) is written here, with `run` and
-- `claimed_from`, which stand for the claimed event (lib/job.lua `happen`);
-- `rank` stays (a ZREM of that member finds nothing: no HDEL for it) and a
-- cleared field is deleted only when the hash has it (most have none).
-- A queue with limits (lib/flow.lua `flow.limits`: one HGET a queue) is
-- claimed after the others, by `flow.claim_queue` (store.flow_rules.admit in Lua).
-- `op` is the claim's row of the lifecycle table. Returns the leased jobs,
-- each as the JSON text of {hash, lease_token, lease_expires_at, now, id}
-- (store/redis/codec.py `claim_entry`; one bulk string: converting a job's
-- 30-odd strings one by one into the reply cost more than cjson's text of
-- them, 490.5k -> 477.2k server instructions an ack that claims the next
-- job; a NUL-joined text measured no better than cjson): `hash` the job's flat
-- HGETALL array as it was before the claim (read instead of an HMGET of the
-- fields the lease needs), to which the reader applies the claim's row
-- (store/redis/codec.py `claimed_job`: status, stamps = now, clears, the
-- lease and worker_id), so the reply carries no field the claim wrote; and
-- the seconds until a rate limit that held jobs reopens (nil when none held
-- any).
-- The fields a claim clears, as a set (built at load: a numeric loop).
local CLAIM_CLEARS = {}
for i = 1, #OPERATIONS['claim'].clears do
  CLAIM_CLEARS[OPERATIONS['claim'].clears[i]] = true
end

local function claim_jobs(op, worker, ttl, want, promote, notified, queues)
  local paused = P .. 'paused'
  local candidates = {}  -- {ready member, queue}, in claim order
  local limited = {}  -- {queue, its limits}: claimed after the others (lib/flow.lua)
  if notified then
    if redis.call('SISMEMBER', paused, queues[1]) == 0 then
      local limits = flow.limits(queues[1])
      if limits then
        limited[1] = {queues[1], limits}
      else
        candidates[1] = {notified, queues[1]}
      end
    end
  else
    -- texts, not numbers: redis.call formats a number argument with %.17g
    local promote_text, last_text = count_text(promote), count_text(want - 1)
    for _, queue in ipairs(queues) do
      if redis.call('SISMEMBER', paused, queue) == 0 then
        local ready, scheduled = P .. 'ready:' .. queue, P .. 'scheduled:' .. queue
        for _, member in ipairs(redis.call('ZRANGEBYSCORE', scheduled, '-inf', now_text, 'LIMIT', '0', promote_text)) do
          promote_due(queue, member)
        end
        local limits = flow.limits(queue)
        if limits then
          limited[#limited + 1] = {queue, limits}
        else
          for _, member in ipairs(redis.call('ZRANGE', ready, '0', last_text)) do
            candidates[#candidates + 1] = {member, queue}
          end
        end
      end
    end
    if #queues > 1 then
      table.sort(candidates, function(a, b) return a[1] < b[1] end)
    end
  end

  local out = {}
  local padded = false  -- LEASES_PAD is in the leases zset (once a call)
  -- Lease ready `member` of `queue`; its id and new token, or nil.
  local function lease(member, queue)
    if redis.call('ZREM', P .. 'ready:' .. queue, member) == 1 then
      -- the id follows the rank's 24 digits and ':' (store/redis/keys.py RANK_HEAD)
      local id = string.sub(member, 26)
      local hash = redis.call('HGETALL', P .. 'job:' .. id)
      local status, lease_ttl, token, name, key
      local present = {}  -- the fields of op.clears the hash has (none: no HDEL)
      for i = 1, #hash, 2 do
        local field = hash[i]
        if CLAIM_CLEARS[field] then
          present[field] = true
        elseif field == 'status' then
          status = hash[i + 1]
        elseif field == 'lease_ttl_seconds' then
          lease_ttl = hash[i + 1]
        elseif field == 'lease_token' then
          token = hash[i + 1]
        elseif field == 'name' then
          name = hash[i + 1]
        elseif field == 'limit_key' then
          key = hash[i + 1]
        end
      end
      if key then  -- out of its key's ready set too (lib/ready.lua)
        keyed_remove(queue, key, member)
      end
      local old = tonumber(status)
      if old and op.sources[old] then
        token = (tonumber(token) or 0) + 1  -- absent: 0 (store/redis/codec.py job_from_hash)
        local expires = now + (tonumber(lease_ttl) or ttl)
        local token_text, expires_text = string.format('%d', token), fmt(expires)
        move(id, queue, old, op.target, name)
        change(id, op, op.target, {'lease_token', token_text, 'worker_id', worker,
          'lease_expires_at', expires_text,
          'run', RUN_CLAIMED, 'claimed_from', status}, nil, present)
        if not padded then  -- keeps the zset a skiplist (store/redis/keys.py LEASES_PAD)
          redis.call('ZADD', P .. 'leases', 'NX', '+inf', LEASES_PAD)
          padded = true
        end
        redis.call('ZADD', P .. 'leases', micros(expires), id)
        happen(id, op.event, old, op.target, worker, token)
        out[#out + 1] = cjson.encode({hash, token_text, expires_text, now_text, id})
        return id, token
      end
    end
    return nil
  end

  for _, c in ipairs(candidates) do
    if #out >= want then
      break
    end
    lease(c[1], c[2])
  end
  local retry
  for _, q in ipairs(limited) do
    if #out >= want then
      break
    end
    local _, wait = flow.claim_queue(q[1], q[2], want - #out, lease)
    if wait and (not retry or wait < retry) then
      retry = wait
    end
  end
  return out, retry
end

-- Milliseconds a hand-over list outlives its last push: the list of a worker
-- that died keeps its entries for recovery (which takes them off, as its
-- worker would have) long after their leases expire, but not for ever (a
-- handed job canceled or deleted meanwhile leaves its entry behind).
local HAND_KEPT_MS = '86400000'

-- Hand the ready `members` of `queue` (a list, claim handles of jobs this
-- call made ready) over to idle workers, one each, in order (an enqueue
-- leases to a worker waiting on the queue, docs/architecture.md, Hand-over).
-- Each registration of idle:<queue> (lua/idle.lua; member '<lease TTL s>
-- <worker id>', score its expiry in microseconds), the one renewed last
-- first (a worker that died while idle is the last to be picked), is taken
-- (when that one has expired, so has every other: the set is dropped) and
-- given the next member through
-- `claim_jobs` with the claim's row of the lifecycle table (pause decides as
-- in any notified claim), and the claim's reply entry is pushed on
-- that worker's list hand:<worker> (the same text)
-- (store/redis/wakeups.py pops it; the list expires HAND_KEPT_MS after its
-- last push). A registration whose claim leases nothing (paused) is put back
-- and the handing stops. A queue with limits hands nothing over (its claim
-- admits jobs in its own order, lib/flow.lua): its jobs wake a worker as
-- before. Returns how many jobs were handed.
local function hand_over(queue, members)
  local idle = P .. 'idle:' .. queue
  local handed, op = 0, nil
  while handed < #members do
    local got = redis.call('ZRANGE', idle, '-1', '-1', 'WITHSCORES')  -- texts: a number is formatted
    if #got == 0 then
      break
    end
    local member, score = got[1], got[2]
    if tonumber(score) < now * 1000000 then
      redis.call('DEL', idle)  -- the last renewed has expired: so has every other
      break
    end
    if op == nil then
      if flow.limits(queue) then
        break
      end
      op = operation('claim')
    end
    redis.call('ZREM', idle, member)
    local ttl, worker = string.match(member, '^(%S+) (.*)$')
    local out = claim_jobs(op, worker, tonumber(ttl), 1, 0, members[handed + 1], {queue})
    if #out == 0 then
      redis.call('ZADD', idle, score, member)
      break
    end
    local hand = P .. 'hand:' .. worker
    redis.call('RPUSH', hand, out[1])
    redis.call('PEXPIRE', hand, HAND_KEPT_MS)
    handed = handed + 1
  end
  return handed
end
