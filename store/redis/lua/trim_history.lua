-- trim_history: drop history buckets older than their width's retention, at
-- most a given number of fields per width a call (the caller calls again
-- while a width had more).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: history:<width> (hash)
--              and history_index:<width> (zset) of each width
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      most fields removed per width this call
-- ARGV[1 + 2w], ARGV[2 + 2w]: width w's bucket width and retention, seconds
--              (store/counters.py HISTORY_WIDTHS)
-- A field goes when its bucket start < now - retention: read from the zset by
-- score (the lowest ranks), deleted from the hash, then those ranks from the zset.
-- Returns:     one entry per width: fields removed
--
-- @include lib/clock.lua

local limit = tonumber(ARGV[2])
local out = {}
for w = 1, (#ARGV - 2) / 2 do
  local width, before = ARGV[1 + 2 * w], '(' .. fmt(now - tonumber(ARGV[2 + 2 * w]))
  local index = P .. 'history_index:' .. width
  local fields = redis.call('ZRANGEBYSCORE', index, '-inf', before, 'LIMIT', 0, limit)
  if #fields > 0 then
    redis.call('HDEL', P .. 'history:' .. width, unpack(fields))
    redis.call('ZREMRANGEBYRANK', index, 0, #fields - 1)
  end
  out[w] = #fields
end
return out
