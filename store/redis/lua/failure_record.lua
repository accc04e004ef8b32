-- failure_record: count one failure of a key in a fixed window of the
-- store's clock, opened by the key's first failure (login throttling).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: failure:<digest> (hash: n,
--              window_end, epoch seconds)
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      window, seconds
-- ARGV[3]      the key's digest
-- The key also expires in Redis when its window closes (PEXPIRE), so a
-- closed window leaves nothing behind.
-- Returns:     the count in the open window
--
-- @include lib/clock.lua

local window = tonumber(ARGV[2])
local failure = P .. 'failure:' .. ARGV[3]
local f = redis.call('HMGET', failure, 'n', 'window_end')
local n, window_end = 1, now + window
if f[1] and tonumber(f[2]) > now then
  n, window_end = tonumber(f[1]) + 1, tonumber(f[2])
end
redis.call('HSET', failure, 'n', n, 'window_end', window_end)
redis.call('PEXPIRE', failure, math.max(1, math.ceil((window_end - now) * 1000)))
return n
