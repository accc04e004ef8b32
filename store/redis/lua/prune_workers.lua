-- prune_workers: remove workers not seen for `age` seconds (dead ones), each
-- only if it has still not been seen since now - age (one that beat since the
-- caller read the ids is kept).
--
-- KEYS[1]      workers zset: worker ids by last_seen_at
-- KEYS[1 + i]  worker i's hash
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      age, seconds
-- ARGV[2 + i]  worker i's id
-- Returns:     {id, ...} the workers removed
--
-- @include lib/clock.lua

local before, out = now - tonumber(ARGV[2]), {}
for i = 1, #KEYS - 1 do
  local id = ARGV[2 + i]
  local seen = redis.call('ZSCORE', KEYS[1], id)
  if seen and tonumber(seen) < before then
    redis.call('ZREM', KEYS[1], id)
    redis.call('DEL', KEYS[1 + i])
    out[#out + 1] = id
  end
end
return out
