-- history: the history fields of one width from a bucket start on, with
-- their counts (read only; store/redis/history.py sums them).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: history:<width>,
--              history_index:<width>, history_rolled:<width> of the width read and
--              of the narrowest width
-- ARGV[1]      the width read, seconds
-- ARGV[2]      the narrowest width, seconds (HISTORY_WIDTHS[1]: the one written)
-- ARGV[3]      the first bucket start wanted, epoch seconds
-- The narrowest width is read as it is. A wider one is its own buckets
-- before its roll-up mark (lua/trim_history.lua), plus, from the mark on,
-- the narrow buckets not rolled up yet (in one call, so a roll-up never
-- shows twice or not at all); the caller sums those into their wider buckets.
-- Returns:     {fields, counts}: fields `<bucket start>|<queue>|<kind>` of either
--              width (history fields, store/redis/keys.py parse_history_field)

local width, narrow, since = ARGV[1], ARGV[2], tonumber(ARGV[3])
local fields, counts = {}, {}

-- Append the fields of `w` with a bucket start in [low, high) and their counts.
local function read(w, low, high)
  local found = redis.call('ZRANGEBYSCORE', P .. 'history_index:' .. w, low, high)
  if #found > 0 then
    local values = redis.call('HMGET', P .. 'history:' .. w, unpack(found))
    for i, field in ipairs(found) do
      if values[i] then
        fields[#fields + 1] = field
        counts[#counts + 1] = values[i]
      end
    end
  end
end

if width == narrow then
  read(width, since, '+inf')
else
  local w = tonumber(width)
  -- a narrow bucket counts in the wider bucket that holds it: from the first wider start >= since
  local from = math.ceil(since / w) * w
  local rolled = tonumber(redis.call('GET', P .. 'history_rolled:' .. width) or '')
  if rolled then
    if rolled > since then
      read(width, since, '(' .. string.format('%.17g', rolled))
    end
    from = math.max(from, rolled)
  end
  read(narrow, string.format('%.17g', from), '+inf')
end
return {fields, counts}
