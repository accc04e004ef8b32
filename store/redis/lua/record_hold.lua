-- record_hold: take, renew or release a hold (an expiring compare-and-set
-- record with a fencing token: a distributed lock; store/ports.py).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: rec:hold:<name>
--              (hash: holder as JSON text, expires_at epoch seconds, token)
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      hold name
-- ARGV[3]      holder, as JSON text
-- ARGV[4]      TTL, seconds; '' releases the hold
-- Taken when free, expired (expires_at < now) or already the holder's;
-- the token grows by one whenever the hold changes hands or was expired, and
-- survives a release (the hash keeps it), so it is never reused.
-- Returns:     take: the token, or false when another holder has it;
--              release: 1 released, 0 not the holder's
--
-- @include lib/clock.lua

local key = P .. 'rec:hold:' .. ARGV[2]
local f = redis.call('HMGET', key, 'holder', 'expires_at', 'token')
if ARGV[4] == '' then
  if f[1] ~= ARGV[3] then
    return 0
  end
  redis.call('HDEL', key, 'holder', 'expires_at')
  return 1
end
local live = f[1] and tonumber(f[2]) >= now
if live and f[1] ~= ARGV[3] then
  return false
end
local token = tonumber(f[3] or '0') + (live and 0 or 1)
redis.call('HSET', key, 'holder', ARGV[3], 'expires_at', fmt(now + tonumber(ARGV[4])), 'token', token)
return token
