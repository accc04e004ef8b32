-- lib/clock.lua: the store's clock, a section of the library's top level
-- (store/redis/scripts.py). A function whose file has the line
-- `-- @include lib/clock.lua` runs start_clock() before its body.
--
-- KEYS: none of its own.
-- ARGV[1]: clock offset, seconds (float; 0 in production, tests move time with it).
-- Returns: nothing. Defines `fmt(x)` (a number as text that reads back as the
-- same double), `micros(x)` (seconds x as whole microseconds, the score of a
-- small hot zset: an integer keeps a listpack's ZADD/ZREM from parsing every
-- float score, docs/architecture.md, Redis key schema) and, per call, `now` (Redis TIME + offset, epoch seconds) and
-- `now_text` (fmt(now), written once: a number passed to redis.call is
-- formatted again at every call).

local function fmt(x)
  return string.format('%.17g', x)
end

local function micros(x)
  return string.format('%d', math.floor(x * 1000000 + 0.5))
end

local now, now_text
local function start_clock()
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000 + tonumber(ARGV[1])
  now_text = fmt(now)
end
