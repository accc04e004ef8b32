-- lib/clock.lua: the store's clock, a section of the library's top level
-- (store/redis/scripts.py). A function whose file has the line
-- `-- @include lib/clock.lua` runs start_clock() before its body.
--
-- KEYS: none of its own.
-- ARGV[1]: clock offset, seconds (float; 0 in production, tests move time with it).
-- Returns: nothing. Defines `fmt(x)` (a number as text that reads back as the
-- same double) and, per call, `now` (Redis TIME + offset, epoch seconds) and
-- `now_text` (fmt(now), written once: a number passed to redis.call is
-- formatted again at every call).

local function fmt(x)
  return string.format('%.17g', x)
end

local now, now_text
local function start_clock()
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000 + tonumber(ARGV[1])
  now_text = fmt(now)
end
