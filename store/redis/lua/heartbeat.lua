-- heartbeat: renew many leases at once.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: leases, job:<id>
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      lease TTL, seconds (for jobs without their own lease_ttl_seconds)
-- ARGV[3]      the status a lease is held in (InProgress)
-- ARGV[2 + 2i], ARGV[3 + 2i]: lease i's job id and token (i = 1..n)
-- A lease is renewed only when the job is InProgress, the token is current and
-- the lease has not expired (lease_expires_at >= now); nothing else is written.
-- Returns:     one entry per lease: {1, new lease_expires_at} renewed,
--              {0, current token, status} refused, {-1} no such job
--
-- @include lib/clock.lua

local ttl, held = tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {}
for i = 1, (#ARGV - 3) / 2 do
  local id, token = ARGV[2 + 2 * i], tonumber(ARGV[3 + 2 * i])
  local job = P .. 'job:' .. id
  local f = redis.call('HMGET', job, 'status', 'lease_token', 'lease_expires_at', 'lease_ttl_seconds')
  if not f[1] then
    out[i] = {-1}
  elseif tonumber(f[1]) == held and tonumber(f[2]) == token and tonumber(f[3]) >= now then
    local expires = now + (tonumber(f[4]) or ttl)
    redis.call('HSET', job, 'lease_expires_at', expires, 'last_heartbeat_at', now)
    redis.call('ZADD', P .. 'leases', micros(expires), id)
    out[i] = {1, fmt(expires)}
  else
    out[i] = {0, f[2] or '0', f[1]}
  end
end
return out
