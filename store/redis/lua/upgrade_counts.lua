-- upgrade_counts: move a layout-2 deployment's counts to this layout's
-- (leasehold db upgrade, store/redis/upgrade.py): idempotent, one call.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: counters,
--              history:<width>, history_index:<width>, history_rolled:<width>
-- ARGV[1]      clock offset, seconds
-- ARGV[2..4]   the counter prefixes of store/counters.py: a status counter's
--              (STATUS_PREFIX), a per-queue total's (QUEUE_EVENT_PREFIX), and an
--              upgraded store's count of earlier events (BEFORE_PREFIX)
-- ARGV[5]      the event kinds of HISTORY_KINDS, space separated
-- ARGV[6..]    the history widths but the narrowest, seconds
-- In the counters hash: every status counter `s:<status>:<queue>` goes (counts
-- are read from the indexes, lua/counts.lua); each history kind's `e:<kind>`
-- total (lib/job.lua event_counter) becomes `b:<kind>`, the events it counted beyond the kind's per-queue
-- totals (those counted before the per-queue totals existed), and is gone.
-- Per wider width without a roll-up mark: its buckets from the current one on
-- go (the narrow buckets hold the same counts, summed at read time) and the
-- mark is set to the current bucket: the ones before it hold their sums.
-- Returns:     {counter fields removed, wide history fields removed}
--
-- @include lib/clock.lua

local counters = P .. 'counters'
local status_prefix, queue_prefix, before_prefix = ARGV[2], ARGV[3], ARGV[4]
local flat = redis.call('HGETALL', counters)
local stale, per_kind = {}, {}
for i = 1, #flat, 2 do
  local field = flat[i]
  if string.sub(field, 1, #status_prefix) == status_prefix then
    stale[#stale + 1] = field
  elseif string.sub(field, 1, #queue_prefix) == queue_prefix then
    local rest = string.sub(field, #queue_prefix + 1)
    local colon = string.find(rest, ':', 1, true)
    if colon then
      local kind = string.sub(rest, 1, colon - 1)
      per_kind[kind] = (per_kind[kind] or 0) + tonumber(flat[i + 1])
    end
  end
end
local removed = #stale
for kind in string.gmatch(ARGV[5], '%S+') do
  local total = redis.call('HGET', counters, event_counter(kind))
  if total then
    local before = tonumber(total) - (per_kind[kind] or 0)
    if before > 0 then
      redis.call('HINCRBY', counters, before_prefix .. kind, before)
    end
    stale[#stale + 1] = event_counter(kind)
  end
end
for i = 1, #stale, 1000 do
  redis.call('HDEL', counters, unpack(stale, i, math.min(i + 999, #stale)))
end
local wide = 0
for i = 6, #ARGV do
  local width = tonumber(ARGV[i])
  local mark = P .. 'history_rolled:' .. ARGV[i]
  if not redis.call('GET', mark) then
    local current = math.floor(now / width) * width
    local index = P .. 'history_index:' .. ARGV[i]
    local fields = redis.call('ZRANGEBYSCORE', index, current, '+inf')
    for j = 1, #fields, 1000 do
      local part = {unpack(fields, j, math.min(j + 999, #fields))}
      redis.call('HDEL', P .. 'history:' .. ARGV[i], unpack(part))
      redis.call('ZREM', index, unpack(part))
    end
    wide = wide + #fields
    redis.call('SET', mark, fmt(current))
  end
end
return {removed, wide}
