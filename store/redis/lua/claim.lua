-- claim: lease due jobs in one call: promote due scheduled jobs to ready,
-- skip paused queues, take the heads of the ready zsets in claim order
-- (priority descending, then oldest due, then id: the byte order of the
-- ready members, lib/job.lua `rank`, merged across queues), lease each.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: paused,
--              ready:<queue>, scheduled:<queue>, job:<id>, events:<id>, leases,
--              counters, updated zsets, listing zsets
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      operation name, 'claim': its row of the lifecycle table compiled into
--              the library (lib/job.lua `operation`)
-- ARGV[5]      worker id
-- ARGV[6]      lease TTL, seconds (for jobs without their own lease_ttl_seconds)
-- ARGV[7]      most jobs to claim
-- ARGV[8]      most due scheduled jobs moved to ready per queue (bounds the call)
-- ARGV[9]      a ready member to claim alone (a wake-up notice names it; the
--              queue is ARGV[10]), or '' to claim by claim order
-- ARGV[10..]   queue names
-- A promoted job stays Scheduled until claimed. A member is leased only when
-- ZREM of it returns 1 (a notice may name a job another worker took);
-- lease_token goes up by one at every claim, and the lease (worker_id,
-- lease_token, lease_expires_at) is written here, with `run` and
-- `claimed_from`, which stand for the claimed event (lib/job.lua `happen`).
-- A queue with limits (lib/flow.lua `flow.limits`: one HGET a queue) is
-- claimed after the others, by `flow.claim_queue` (store.flow.admit in Lua).
-- Returns:     {job_1, job_2, ...}: each leased job as a flat HGETALL array;
--              then {'retry_after', seconds} when a rate limit held jobs
--              (store/redis/flow.py reads it: claim_retry_after)
--
-- @include lib/clock.lua
-- @include lib/job.lua

local op = operation(ARGV[4])
local worker, ttl, want, promote = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local notified = none(ARGV[9])
local paused = P .. 'paused'
local candidates = {}  -- {ready member, queue}, in claim order
local limited = {}  -- {queue, its limits}: claimed after the others (lib/flow.lua)
if notified then
  if redis.call('SISMEMBER', paused, ARGV[10]) == 0 then
    local limits = flow.limits(ARGV[10])
    if limits then
      limited[1] = {ARGV[10], limits}
    else
      candidates[1] = {notified, ARGV[10]}
    end
  end
else
  for i = 10, #ARGV do
    local queue = ARGV[i]
    if redis.call('SISMEMBER', paused, queue) == 0 then
      local ready, scheduled = P .. 'ready:' .. queue, P .. 'scheduled:' .. queue
      for _, member in ipairs(redis.call('ZRANGEBYSCORE', scheduled, '-inf', now_text, 'LIMIT', 0, promote)) do
        redis.call('ZADD', ready, 0, member)
        redis.call('ZREM', scheduled, member)
      end
      local limits = flow.limits(queue)
      if limits then
        limited[#limited + 1] = {queue, limits}
      else
        for _, member in ipairs(redis.call('ZRANGE', ready, 0, want - 1)) do
          candidates[#candidates + 1] = {member, queue}
        end
      end
    end
  end
  if #ARGV > 10 then
    table.sort(candidates, function(a, b) return a[1] < b[1] end)
  end
end

local out = {}
-- Lease ready `member` of `queue`; its id and new token, or nil.
local function lease(member, queue)
  if redis.call('ZREM', P .. 'ready:' .. queue, member) == 1 then
    -- the id follows the rank's 24 digits and ':' (store/redis/keys.py RANK_HEAD)
    local id = string.sub(member, 26)
    local job = P .. 'job:' .. id
    local f = redis.call('HMGET', job, 'status', 'lease_ttl_seconds', 'lease_token', 'name', 'last_updated_at')
    local old = tonumber(f[1])
    if old and op.sources[old] then
      local token = tonumber(f[3]) + 1
      local expires = fmt(now + (tonumber(f[2]) or ttl))
      move(id, queue, old, op.target, f[4], f[5])
      change(id, op, op.target, {'lease_token', token, 'worker_id', worker, 'lease_expires_at', expires,
        'run', RUN_CLAIMED, 'claimed_from', old}, {'rank'})
      redis.call('ZADD', P .. 'leases', expires, id)
      happen(id, op.event, old, op.target, worker, token)
      out[#out + 1] = redis.call('HGETALL', job)
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
flush_counts()
if retry then
  out[#out + 1] = {'retry_after', fmt(retry)}
end
return out
