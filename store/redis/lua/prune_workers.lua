-- prune_workers: remove workers not seen for `age` seconds (dead ones), each
-- only if it has still not been seen since now - age (one that beat since the
-- caller read the ids is kept).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: workers (zset: worker ids by
--              last_seen_at), worker:<id> (hash)
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      age, seconds
-- ARGV[2 + i]  worker i's id
-- Returns:     {id, ...} the workers removed
--
-- @include lib/clock.lua

local before, out = now - tonumber(ARGV[2]), {}
for i = 1, #ARGV - 2 do
  local id = ARGV[2 + i]
  local seen = redis.call('ZSCORE', P .. 'workers', id)
  if seen and tonumber(seen) < before then
    redis.call('ZREM', P .. 'workers', id)
    redis.call('DEL', P .. 'worker:' .. id)
    out[#out + 1] = id
  end
end
return out
