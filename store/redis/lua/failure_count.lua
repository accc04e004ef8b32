-- failure_count: the open window of a key's failure count.
--
-- KEYS[1]      failure hash of the key: n, window_end (epoch seconds)
-- ARGV[1]      clock offset, seconds
-- Returns:     {n, seconds left in the window as text}, or {0, '0'} when
--              no window is open
--
-- @include lib/clock.lua

local f = redis.call('HMGET', KEYS[1], 'n', 'window_end')
if f[1] and tonumber(f[2]) > now then
  return {tonumber(f[1]), tostring(tonumber(f[2]) - now)}
end
return {0, '0'}
