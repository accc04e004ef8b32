-- heartbeat: renew many leases at once.
--
-- KEYS[1..9]   common block (lib/job.lua; only KEYS[9], the leases zset, is written)
-- KEYS[9 + i]  job hash of lease i = 1..n
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      events kept per job (unused; common ARGV layout)
-- ARGV[3]      lease TTL, seconds (for jobs without their own lease_ttl_seconds)
-- ARGV[4]      the status a lease is held in (InProgress)
-- ARGV[3 + 2i], ARGV[4 + 2i]: lease i's job id and token
-- A lease is renewed only when the job is InProgress, the token is current and
-- the lease has not expired (lease_expires_at >= now); nothing else is written.
-- Returns:     one entry per lease: {1, new lease_expires_at} renewed,
--              {0, current token, status} refused, {-1} no such job
--
-- @include lib/clock.lua
-- @include lib/job.lua

local ttl, held = tonumber(ARGV[3]), tonumber(ARGV[4])
local out = {}
for i = 1, #KEYS - 9 do
  local id, token = ARGV[3 + 2 * i], tonumber(ARGV[4 + 2 * i])
  local f = redis.call('HMGET', KEYS[9 + i], 'status', 'lease_token', 'lease_expires_at', 'lease_ttl_seconds')
  if not f[1] then
    out[i] = {-1}
  elseif tonumber(f[1]) == held and tonumber(f[2]) == token and tonumber(f[3]) >= now then
    local expires = now + (tonumber(f[4]) or ttl)
    redis.call('HSET', KEYS[9 + i], 'lease_expires_at', expires, 'last_heartbeat_at', now)
    redis.call('ZADD', KEYS[9], expires, id)
    out[i] = {1, fmt(expires)}
  else
    out[i] = {0, f[2], f[1]}
  end
end
return out
