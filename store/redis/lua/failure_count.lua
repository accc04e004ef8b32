-- failure_count: the open window of a key's failure count.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: failure:<digest> (hash: n,
--              window_end, epoch seconds)
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      the key's digest
-- Returns:     {n, seconds left in the window as text}, or {0, '0'} when
--              no window is open
--
-- @include lib/clock.lua

local f = redis.call('HMGET', P .. 'failure:' .. ARGV[2], 'n', 'window_end')
if f[1] and tonumber(f[2]) > now then
  return {tonumber(f[1]), tostring(tonumber(f[2]) - now)}
end
return {0, '0'}
