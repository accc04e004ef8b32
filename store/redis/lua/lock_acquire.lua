-- lock_acquire: take or extend a named lock (set-if-free with expiry, by the
-- store's clock so the clock offset of tests applies too).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: lock:<name> (hash: owner,
--              expires_at, epoch seconds)
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      owner
-- ARGV[3]      TTL, seconds
-- ARGV[4]      lock name
-- Taken when the lock is free, expired (expires_at < now) or already the
-- owner's; the key also expires in Redis after TTL (PEXPIRE) so an abandoned
-- lock leaves no key behind.
-- Returns:     1 the owner holds the lock, 0 someone else does
--
-- @include lib/clock.lua

local lock = P .. 'lock:' .. ARGV[4]
local f = redis.call('HMGET', lock, 'owner', 'expires_at')
if f[1] and f[1] ~= ARGV[2] and tonumber(f[2]) >= now then
  return 0
end
local ttl = tonumber(ARGV[3])
redis.call('HSET', lock, 'owner', ARGV[2], 'expires_at', now + ttl)
redis.call('PEXPIRE', lock, math.max(1, math.ceil(ttl * 1000)))
return 1
