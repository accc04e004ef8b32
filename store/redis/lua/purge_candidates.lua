-- purge_candidates: finished jobs last updated before now - age (purge step 1;
-- read only), by status then oldest first, as the SQL store orders them.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: updated:<status>
--              (score last_updated_at, µs) of each status of ARGV[3]
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      age, seconds
-- ARGV[3]      statuses, finished ones (e.g. "400 500 600"), in this order
-- ARGV[4]      most ids returned
-- Returns:     {id_1, id_2, ...}
--
-- @include lib/clock.lua

local before, left = '(' .. micros(now - tonumber(ARGV[2])), tonumber(ARGV[4])
local out = {}
for status in string.gmatch(ARGV[3], '%d+') do
  if left <= 0 then
    break
  end
  local ids = redis.call('ZRANGEBYSCORE', P .. 'updated:' .. status, '-inf', before, 'LIMIT', 0, left)
  for _, id in ipairs(ids) do
    out[#out + 1] = id
  end
  left = left - #ids
end
return out
