-- lib/claim.lua: the claim, a section of the library's top level after
-- lib/job.lua (store/redis/scripts.py), called by lua/claim.lua and by the
-- ack that claims the next jobs (lua/complete_claim.lua), and by the hand-over
-- of new jobs to idle workers (lib/hand_over.lua). Its caller includes
-- lib/clock.lua and lib/job.lua and calls flush_counts().
--
-- KEYS, ARGV: none of its own.
-- Keys written: paused (read), ready:<queue>, scheduled:<queue>, job:<id>,
-- leases, and what lib/job.lua `move` and lib/expiry.lua write.
-- Returns: nothing. Defines claim_jobs (lib/hand_over.lua builds on it).

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
-- A job whose hash has an expires_at that now has reached is not leased but
-- ended (lib/expiry.lua `expire_job`), and the call claims again behind it
-- (at most EXPIRE_ROUNDS rounds), so expired heads never starve a worker.
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

-- Rounds of one claim call when expired jobs made it short (`rounds`, nil: all of them).
local EXPIRE_ROUNDS = 8

local claim_jobs
function claim_jobs(op, worker, ttl, want, promote, notified, queues, rounds)
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

  local out, expired = {}, 0
  local padded = false  -- LEASES_PAD is in the leases zset (once a call)
  -- Lease ready `member` of `queue`; its id and new token, or nil.
  local function lease(member, queue)
    if redis.call('ZREM', P .. 'ready:' .. queue, member) == 1 then
      -- the id follows the rank's 24 digits and ':' (store/redis/keys.py RANK_HEAD)
      local id = string.sub(member, 26)
      local hash = redis.call('HGETALL', P .. 'job:' .. id)
      local status, lease_ttl, token, name, expiry, parent, key
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
        elseif field == 'expires_at' then
          expiry = hash[i + 1]
        elseif field == 'has_children' then
          parent = true
        elseif field == 'limit_key' then
          key = hash[i + 1]
        end
      end
      if key then  -- out of its key's ready set too (lib/ready.lua)
        keyed_remove(queue, key, member)
      end
      local old = tonumber(status)
      if old and op.sources[old] and expiry and now >= tonumber(expiry) then
        expire_job(id, queue, old, name, token, worker, parent)  -- lib/expiry.lua: never leased
        expired = expired + 1
      elseif old and op.sources[old] then
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
  -- Expired heads made the claim short: claim again behind them, a bounded
  -- number of rounds (each takes up to `want` expired jobs a queue off).
  rounds = rounds or EXPIRE_ROUNDS
  if expired > 0 and #out < want and not notified and rounds > 1 then
    local more, wait = claim_jobs(op, worker, ttl, want - #out, promote, nil, queues, rounds - 1)
    for _, entry in ipairs(more) do
      out[#out + 1] = entry
    end
    retry = retry or wait
  end
  return out, retry
end
