-- lock_info: the holder of a named lock (read only).
--
-- KEYS[1]      lock hash: owner, expires_at
-- ARGV[1]      clock offset, seconds
-- Returns:     {owner, expires_at} while held (expires_at >= now), {} when free
--
-- @include lib/clock.lua

local f = redis.call('HMGET', KEYS[1], 'owner', 'expires_at')
if f[1] and tonumber(f[2]) >= now then
  return f
end
return {}
