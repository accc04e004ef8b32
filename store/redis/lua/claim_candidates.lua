-- claim_candidates: make due scheduled jobs claimable and list the head of
-- each ready zset (claim step 1; claim.lua is step 2). Paused queues are
-- skipped: their due jobs are neither promoted nor listed.
--
-- KEYS[1]      paused set: names of the paused queues
-- for queue i = 1..n, KEYS[2i], KEYS[2i + 1]:
--              ready zset (every score 0, member = rank, see lib/job.lua),
--              scheduled zset (score = due time, same member text)
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      most members returned per queue
-- ARGV[3]      most due scheduled members moved to ready per queue (bounds the call)
-- ARGV[3 + i]  queue i's name
-- Moves members whose due time <= now from scheduled to ready; the job hash is
-- untouched (a promoted job stays Scheduled until it is claimed).
-- Returns:     { {ready members of queue 1, in claim order}, {... queue 2}, ... }
--              ({} for a paused queue)
--
-- @include lib/clock.lua

local window, promote = tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {}
for i = 1, (#KEYS - 1) / 2 do
  if redis.call('SISMEMBER', KEYS[1], ARGV[3 + i]) == 1 then
    out[i] = {}
  else
    local due = redis.call('ZRANGEBYSCORE', KEYS[2 * i + 1], '-inf', fmt(now), 'LIMIT', 0, promote)
    for _, member in ipairs(due) do
      redis.call('ZADD', KEYS[2 * i], 0, member)
      redis.call('ZREM', KEYS[2 * i + 1], member)
    end
    out[i] = redis.call('ZRANGE', KEYS[2 * i], 0, window - 1)
  end
end
return out
