-- lock_info: the holder of a named lock (read only).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: lock:<name> (hash: owner, expires_at)
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      lock name
-- Returns:     {owner, expires_at} while held (expires_at >= now), {} when free
--
-- @include lib/clock.lua

local f = redis.call('HMGET', P .. 'lock:' .. ARGV[2], 'owner', 'expires_at')
if f[1] and tonumber(f[2]) >= now then
  return f
end
return {}
