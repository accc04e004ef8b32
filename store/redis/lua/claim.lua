-- claim: lease candidate jobs in the order given (claim step 2).
--
-- KEYS[1..10]  common block (lib/job.lua)
-- KEYS[11]     paused set: names of the paused queues
-- for candidate i = 1..n, KEYS[11 + 3i - 2], KEYS[11 + 3i - 1], KEYS[11 + 3i]:
--              job hash, event list, ready zset holding the candidate's member
-- KEYS[#KEYS - 8 .. #KEYS] listing block of Queued .. InProgress (lib/job.lua
--              `listing_last(100, 300)`)
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      operation name, 'claim': its row of the lifecycle table compiled into
--              the library (lib/job.lua `operation`)
-- ARGV[5]      worker id
-- ARGV[6]     lease TTL, seconds (for jobs without their own lease_ttl_seconds)
-- ARGV[7]     most jobs to claim
-- ARGV[6 + 2i], ARGV[7 + 2i]: candidate i's job id and ready member
-- A candidate is ours only when ZREM of its member returns 1, so two callers
-- never both lease it; lease_token goes up by one at every claim, and the
-- lease (worker_id, lease_token, lease_expires_at) is written here. A
-- candidate whose queue is paused (now, in this script) is left where it is.
-- Returns:     {lost, job_1, job_2, ...}: lost = candidates already taken by
--              others, then each leased job as a flat HGETALL array
--
-- @include lib/clock.lua
-- @include lib/job.lua

local op = operation(ARGV[4])
local l = listing_last(100, 300)
local worker, ttl, want = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
local out, paused = {0}, {}

-- Whether `queue` is paused (read once per queue and call).
local function is_paused(queue)
  if paused[queue] == nil then
    paused[queue] = redis.call('SISMEMBER', KEYS[11], queue) == 1
  end
  return paused[queue]
end

for i = 1, (#KEYS - 11 - l) / 3 do
  if #out > want then
    break
  end
  local k, id = 11 + 3 * (i - 1), ARGV[6 + 2 * i]
  local f = redis.call('HMGET', KEYS[k + 1], 'status', 'queue', 'lease_ttl_seconds', 'lease_token')
  if f[2] and is_paused(f[2]) then
    -- left in its ready zset: claimed once the queue is resumed
  elseif redis.call('ZREM', KEYS[k + 3], ARGV[7 + 2 * i]) == 0 then
    out[1] = out[1] + 1
  else
    local old = tonumber(f[1])
    if old and op.sources[old] then
      local token = tonumber(f[4]) + 1
      local expires = fmt(now + (tonumber(f[3]) or ttl))
      move(k + 1, id, f[2], old, op.target)
      change(k + 1, op, op.target, {'lease_token', token, 'worker_id', worker, 'lease_expires_at', expires}, {'rank'})
      redis.call('ZADD', KEYS[9], expires, id)
      append_event(k + 2, id, op.event, old, op.target, worker, token, nil)
      out[#out + 1] = redis.call('HGETALL', KEYS[k + 1])
    end
  end
end
flush_counts()
return out
