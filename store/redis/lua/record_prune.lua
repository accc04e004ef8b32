-- record_prune: remove the oldest records of a kind, each checked and
-- removed in this one call (store/ports.py RecordPort.record_prune).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: recs:<kind>
--              (zset: keys by score), rec:<kind>:<key> (hash)
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      kind
-- ARGV[3]      age, seconds: records scored below now - age go; '' the
--              expired ones among the lowest scored (`~x` <= now, or gone)
-- ARGV[4]      limit: most records examined
-- Returns:     {key, ...} the records removed
--
-- @include lib/clock.lua

local kind, limit = ARGV[2], tonumber(ARGV[4])
local index, out = P .. 'recs:' .. kind, {}
local ids
if ARGV[3] ~= '' then
  ids = redis.call('ZRANGEBYSCORE', index, '-inf', '(' .. fmt(now - tonumber(ARGV[3])), 'LIMIT', 0, limit)
else
  ids = {}
  for _, id in ipairs(redis.call('ZRANGE', index, 0, limit - 1)) do
    local rec = P .. 'rec:' .. kind .. ':' .. id
    local x = redis.call('HGET', rec, '~x')
    if redis.call('EXISTS', rec) == 0 or (x and tonumber(x) <= now) then
      ids[#ids + 1] = id
    end
  end
end
for _, id in ipairs(ids) do
  redis.call('DEL', P .. 'rec:' .. kind .. ':' .. id)
  redis.call('ZREM', index, id)
  out[#out + 1] = id
end
return out
