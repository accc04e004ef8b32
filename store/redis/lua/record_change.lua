-- record_change: one atomic change of one record of the record port
-- (store/ports.py Change, the same steps as ports.apply_change).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: rec:<kind>:<key>
--              (hash: the record's fields as JSON texts, `~s` its score, `~x`
--              its expiry, epoch seconds), recs:<kind> (zset: keys by score)
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      kind (no ':')
-- ARGV[3]      key
-- ARGV[4]      create: '1' an absent record is created, '0' it stays absent
-- ARGV[5]      TTL of a new record, seconds, or ''
-- ARGV[6]      score field, or '': the score becomes that field's value
-- ARGV[7]      keep, or '': afterwards the kind keeps its `keep` highest scores
-- ARGV[8]      rise field, or '' (guard: absent or <= ARGV[9])
-- ARGV[9]      rise bound
-- ARGV[10..]   seven sections, each a count then its items: when (field,
--              JSON text; '' = must be absent), init (field, text), stamp_new
--              (fields), set (field, text), drop (fields), add (field,
--              integer), stamp (fields)
-- An expired record (`~x` <= now) is removed first and reads as absent; a
-- new record with a TTL also expires in Redis (PEXPIRE) so it leaves no key.
-- Returns:     false when absent and not created, else
--              {applied 0/1, now, field, value, ...} (the hash afterwards)
--
-- @include lib/clock.lua

local kind, id = ARGV[2], ARGV[3]
local key, index = P .. 'rec:' .. kind .. ':' .. id, P .. 'recs:' .. kind
local at = 10
local function section(width)
  local n, items = tonumber(ARGV[at]), {}
  for j = 0, n - 1 do
    items[#items + 1] = {ARGV[at + 1 + j * width], ARGV[at + 2 + j * width]}
  end
  at = at + 1 + n * width
  return items
end
local when, init, stamp_new, set = section(2), section(2), section(1), section(2)
local drop, add, stamp = section(1), section(2), section(1)

-- The flat field/value list of a section: each entry's own value, or `value` for all.
local function pairs_of(entries, value)
  local out = {}
  for _, e in ipairs(entries) do
    out[#out + 1], out[#out + 2] = e[1], value or e[2]
  end
  return out
end
-- One HSET of a flat field/value list (none when it is empty); a later field wins.
local function hset(fields)
  if #fields > 0 then
    redis.call('HSET', key, unpack(fields))
  end
end
local exists = redis.call('EXISTS', key) == 1
if exists then
  local x = redis.call('HGET', key, '~x')
  if x and tonumber(x) <= now then
    redis.call('DEL', key)
    redis.call('ZREM', index, id)
    exists = false
  end
end
if not exists and ARGV[4] ~= '1' then
  return false
end
local function reply(applied)
  local out = redis.call('HGETALL', key)
  table.insert(out, 1, now_text)
  table.insert(out, 1, applied)
  return out
end

if exists then
  for _, w in ipairs(when) do
    local v = redis.call('HGET', key, w[1])
    if (w[2] == '' and v) or (w[2] ~= '' and v ~= w[2]) then
      return reply(0)
    end
  end
  if ARGV[8] ~= '' then
    local v = redis.call('HGET', key, ARGV[8])
    if v and tonumber(v) > tonumber(ARGV[9]) then
      return reply(0)
    end
  end
else
  local fields = pairs_of(init, nil)
  for _, f in ipairs(stamp_new) do
    fields[#fields + 1], fields[#fields + 2] = f[1], now_text
  end
  if ARGV[5] ~= '' then
    fields[#fields + 1], fields[#fields + 2] = '~x', fmt(now + tonumber(ARGV[5]))
  end
  hset(fields)
end
hset(pairs_of(set, nil))
for _, f in ipairs(drop) do
  redis.call('HDEL', key, f[1])
end
for _, p in ipairs(add) do
  redis.call('HINCRBY', key, p[1], p[2])
end
hset(pairs_of(stamp, now_text))
if redis.call('EXISTS', key) == 0 then  -- a new record with no field yet
  redis.call('HSET', key, '~n', '1')
end
if not exists and ARGV[5] ~= '' then
  redis.call('PEXPIRE', key, math.max(1, math.ceil(tonumber(ARGV[5]) * 1000)))
end
if ARGV[6] ~= '' then
  local s = tonumber(redis.call('HGET', key, ARGV[6]) or '')
  if s then
    redis.call('HSET', key, '~s', fmt(s))
    redis.call('ZADD', index, s, id)
  end
end
if ARGV[7] ~= '' then
  local extra = redis.call('ZCARD', index) - tonumber(ARGV[7])
  if extra > 0 then
    for _, gone in ipairs(redis.call('ZRANGE', index, 0, extra - 1)) do
      redis.call('DEL', P .. 'rec:' .. kind .. ':' .. gone)
    end
    redis.call('ZREMRANGEBYRANK', index, 0, extra - 1)
  end
end
return reply(1)
