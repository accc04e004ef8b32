-- purge_candidates: finished jobs last updated before now - age (purge step 1;
-- read only), by status then oldest first, as the SQL store orders them.
--
-- KEYS[1..n]   updated:<status> zsets of the finished statuses (score last_updated_at)
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      age, seconds
-- ARGV[3]      most ids returned
-- Returns:     {id_1, id_2, ...}
--
-- @include lib/clock.lua

local before, left = '(' .. fmt(now - tonumber(ARGV[2])), tonumber(ARGV[3])
local out = {}
for i = 1, #KEYS do
  if left <= 0 then
    break
  end
  local ids = redis.call('ZRANGEBYSCORE', KEYS[i], '-inf', before, 'LIMIT', 0, left)
  for _, id in ipairs(ids) do
    out[#out + 1] = id
  end
  left = left - #ids
end
return out
