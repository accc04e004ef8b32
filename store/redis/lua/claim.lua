-- claim: lease candidate jobs in the order given (claim step 2).
--
-- KEYS[1..9]   common block (lib/job.lua)
-- for candidate i = 1..n, KEYS[9 + 3i - 2], KEYS[9 + 3i - 1], KEYS[9 + 3i]:
--              job hash, event list, ready zset holding the candidate's member
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      events kept per job
-- ARGV[3]      worker id
-- ARGV[4]      lease TTL, seconds (for jobs without their own lease_ttl_seconds)
-- ARGV[5]      most jobs to claim
-- ARGV[6]      statuses a claim starts from, e.g. "100 200"
-- ARGV[7]      status a claim leads to (InProgress)
-- ARGV[6 + 2i], ARGV[7 + 2i]: candidate i's job id and ready member
-- A candidate is ours only when ZREM of its member returns 1, so two callers
-- never both lease it; lease_token goes up by one at every claim.
-- Returns:     {lost, job_1, job_2, ...}: lost = candidates already taken by
--              others, then each leased job as a flat HGETALL array
--
-- @include lib/clock.lua
-- @include lib/job.lua

local worker, ttl, want = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local sources, target = status_set(ARGV[6]), tonumber(ARGV[7])
local out = {0}
for i = 1, (#KEYS - 9) / 3 do
  if #out > want then
    break
  end
  local k, id = 9 + 3 * (i - 1), ARGV[6 + 2 * i]
  if redis.call('ZREM', KEYS[k + 3], ARGV[7 + 2 * i]) == 0 then
    out[1] = out[1] + 1
  else
    local f = redis.call('HMGET', KEYS[k + 1], 'status', 'queue', 'lease_ttl_seconds')
    local old = tonumber(f[1])
    if old and sources[old] then
      local token = redis.call('HINCRBY', KEYS[k + 1], 'lease_token', 1)
      local expires = now + (tonumber(f[3]) or ttl)
      redis.call('HSET', KEYS[k + 1], 'status', target, 'worker_id', worker,
        'lease_expires_at', expires, 'started_at', now, 'last_heartbeat_at', now,
        'last_updated_at', now)
      redis.call('HDEL', KEYS[k + 1], 'retry_delay_until', 'rank')
      redis.call('ZADD', KEYS[9], expires, id)
      move(id, f[2], old, target)
      append_event(k + 2, 'claimed', old, target, worker, token, nil)
      out[#out + 1] = redis.call('HGETALL', KEYS[k + 1])
    end
  end
end
return out
