-- trim_history: roll the narrowest width's finished buckets up into each
-- wider width, then drop buckets older than their width's retention; at most
-- a given number of buckets rolled up and fields dropped per width a call
-- (the caller calls again while a width had more).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: history:<width> (hash),
--              history_index:<width> (zset) and, for each width but the first,
--              history_rolled:<width> (string)
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      most fields removed per width, and most buckets rolled up per wider
--              width, this call
-- ARGV[1 + 2w], ARGV[2 + 2w]: width w's bucket width and retention, seconds
--              (store/counters.py HISTORY_WIDTHS; the first is the narrowest, the
--              only one the functions that count write: lib/job.lua flush_counts)
-- history_rolled:<width> is where the roll-up of a wider width stands: its
-- buckets before it hold their narrow buckets' sums, later ones are summed
-- at read time (lua/history.lua). A wider bucket is rolled up once it has
-- ended (it starts before the current one): its narrow fields' counts are
-- added to the wider fields and the mark moves past it, in this one call, so
-- a read never counts a narrow bucket twice. Absent, the mark starts at the
-- oldest narrow bucket's wider bucket. A narrow field is dropped only when
-- past its retention and rolled up into every wider width.
-- Returns:     one entry per width: fields removed; then 1 when a wider width
--              has more ended buckets to roll up, else 0
--
-- @include lib/clock.lua

local limit = tonumber(ARGV[2])
local narrow = ARGV[3]
local narrow_hash, narrow_index = P .. 'history:' .. narrow, P .. 'history_index:' .. narrow
local out, more, keep_from = {}, 0, nil
for w = 2, (#ARGV - 2) / 2 do
  local width = tonumber(ARGV[1 + 2 * w])
  local hash, index, mark = P .. 'history:' .. width, P .. 'history_index:' .. width, P .. 'history_rolled:' .. width
  local current = math.floor(now / width) * width
  local rolled = tonumber(redis.call('GET', mark) or '')
  if not rolled then
    local oldest = redis.call('ZRANGE', narrow_index, 0, 0, 'WITHSCORES')[2]
    rolled = oldest and math.floor(tonumber(oldest) / width) * width or current
  end
  local done = 0
  while rolled < current and done < limit do
    local bucket = fmt(rolled)
    local fields = redis.call('ZRANGEBYSCORE', narrow_index, rolled, '(' .. fmt(rolled + width))
    if #fields > 0 then
      local values = redis.call('HMGET', narrow_hash, unpack(fields))
      for i, field in ipairs(fields) do
        if values[i] then
          local member = bucket .. string.sub(field, (string.find(field, '|', 1, true)))
          if redis.call('HINCRBY', hash, member, values[i]) == tonumber(values[i]) then
            redis.call('ZADD', index, rolled, member)
          end
        end
      end
    end
    rolled = rolled + width
    done = done + 1
  end
  redis.call('SET', mark, fmt(rolled))
  if rolled < current then
    more = 1
  end
  keep_from = math.min(keep_from or rolled, rolled)
end
for w = 1, (#ARGV - 2) / 2 do
  local width = ARGV[1 + 2 * w]
  local before = now - tonumber(ARGV[2 + 2 * w])
  if w == 1 and keep_from then
    before = math.min(before, keep_from)
  end
  local index = P .. 'history_index:' .. width
  local fields = redis.call('ZRANGEBYSCORE', index, '-inf', '(' .. fmt(before), 'LIMIT', 0, limit)
  if #fields > 0 then
    redis.call('HDEL', P .. 'history:' .. width, unpack(fields))
    redis.call('ZREMRANGEBYRANK', index, 0, #fields - 1)
  end
  out[w] = #fields
end
out[#out + 1] = more
return out
