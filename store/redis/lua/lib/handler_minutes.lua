-- lib/handler_minutes.lua: the per-handler minute buckets of one call
-- (store/handler_metrics.py), a section of the library's top level after
-- lib/counts.lua (store/redis/scripts.py SECTIONS); HANDLER_MINUTES (its
-- constants, compiled in from store/handler_metrics.py) precedes it.
--
-- KEYS: none of its own (KEYS[1] is the prefix, lib/keys.lua).
-- ARGV: none of its own.
-- Keys written: hmin:<minute start>:<handler name> (hash: field -> n; a
-- field is an outcome's code and its run time's bin, `s-3`, `f140`, the code
-- alone for a run without a start), expiring HANDLER_MINUTES.keep_s after
-- its minute starts (set when a call adds a field to it).
-- Returns: nothing. Defines run_key, count_handler, flush_handler_minutes;
-- a function that counts calls flush_handler_minutes() once, before it returns.

local HM = HANDLER_MINUTES

-- The run-time bin of `ms` milliseconds: DDSketch's logarithmic mapping,
-- ceil(log(ms) / log(gamma)) clamped to [key_min, key_max]; the twin of
-- store/handler_metrics.py `run_key`.
local function run_key(ms)
  if ms <= HM.min_ms then
    return HM.key_min
  end
  local k = math.ceil(math.log(ms) / HM.log_gamma)
  if k < HM.key_min then
    return HM.key_min
  elseif k > HM.key_max then
    return HM.key_max
  end
  return k
end

-- Deltas of this call by key, then field; the current minute and its text,
-- kept between calls (formatted once a minute).
local handler_deltas = {}
local hm_minute, hm_minute_text

-- Count one outcome (its code: HM.succeeded, HM.failed or HM.retried) of
-- handler `name` at now, with its run time `run_s` (seconds; nil: not known)
-- in one field (store/handler_metrics.py `field_of`).
local function count_handler(name, code, run_s)
  local minute = now - now % 60
  if minute ~= hm_minute then
    hm_minute, hm_minute_text = minute, string.format('%d', minute)
  end
  local key = P .. 'hmin:' .. hm_minute_text .. ':' .. name
  local d = handler_deltas[key]
  if not d then
    d = {}
    handler_deltas[key] = d
  end
  local field = code
  if run_s then
    field = code .. string.format('%d', run_key(math.max(0, run_s) * 1000))
  end
  d[field] = (d[field] or 0) + 1
end

-- Write this call's deltas (one HINCRBY a field), emptying the table; a key
-- that got a new field (so a new key too) gets its expiry.
local function flush_handler_minutes()
  for key, d in pairs(handler_deltas) do
    local fresh = false
    for field, n in pairs(d) do
      if redis.call('HINCRBY', key, field, count_text(n)) == n then
        fresh = true
      end
    end
    if fresh then
      redis.call('EXPIREAT', key, string.format('%d', hm_minute + HM.keep_s))
    end
    handler_deltas[key] = nil
  end
end
