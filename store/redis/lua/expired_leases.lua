-- expired_leases: the expired leases, oldest first (recovery step 1; read only).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: leases (zset: InProgress
--              jobs, score lease_expires_at in whole microseconds, member id)
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      most ids returned (0: only count)
-- Returns:     {count of leases with lease_expires_at < now, id_1, id_2, ...}
--
-- @include lib/clock.lua

local below = '(' .. micros(now)
local leases = P .. 'leases'
local out = {redis.call('ZCOUNT', leases, '-inf', below)}
local limit = tonumber(ARGV[2])
if limit > 0 then
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', leases, '-inf', below, 'LIMIT', 0, limit)) do
    out[#out + 1] = id
  end
end
return out
