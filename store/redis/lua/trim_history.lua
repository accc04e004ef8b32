-- trim_history: drop history buckets older than their width's retention, at
-- most a given number of fields per width a call (the caller calls again
-- while a width had more).
--
-- KEYS[2w - 1], KEYS[2w] for width w = 1..n: history hash and history zset
--              (lib/job.lua `history_at`; store/redis/keys.py, Keys.histories)
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      most fields removed per width this call
-- ARGV[2 + w]  retention of width w, seconds (store/counters.py HISTORY_WIDTHS)
-- A field goes when its bucket start < now - retention: read from the zset by
-- score (the lowest ranks), deleted from the hash, then those ranks from the zset.
-- Returns:     one entry per width: fields removed
--
-- @include lib/clock.lua

local limit = tonumber(ARGV[2])
local out = {}
for w = 1, #KEYS / 2 do
  local before = '(' .. fmt(now - tonumber(ARGV[2 + w]))
  local fields = redis.call('ZRANGEBYSCORE', KEYS[2 * w], '-inf', before, 'LIMIT', 0, limit)
  if #fields > 0 then
    redis.call('HDEL', KEYS[2 * w - 1], unpack(fields))
    redis.call('ZREMRANGEBYRANK', KEYS[2 * w], 0, #fields - 1)
  end
  out[w] = #fields
end
return out
