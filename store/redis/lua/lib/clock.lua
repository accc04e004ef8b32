-- lib/clock.lua: the store's clock. Included (`-- @include lib/clock.lua`) by
-- every script that reads the time; scripts.py pastes it in at load time.
--
-- KEYS: none of its own.
-- ARGV[1]: clock offset, seconds (float; 0 in production, tests move time with it).
-- Returns: nothing. Defines `now` (Redis TIME + offset, epoch seconds) and
-- `fmt(x)` (a number as text that reads back as the same double).

local function fmt(x)
  return string.format('%.17g', x)
end

local now
do
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000 + tonumber(ARGV[1])
end
-- `now` as text (fmt), written once: a number passed to redis.call is
-- formatted again at every call.
local now_text = fmt(now)
