-- lib/clock.lua: the store's clock, a section of the library's top level
-- (store/redis/scripts.py). A function whose file has the line
-- `-- @include lib/clock.lua` runs start_clock() before its body.
--
-- KEYS: none of its own.
-- ARGV[1]: clock offset, seconds (float; '0' in production, tests move time
--          with it: store/redis/plumbing.py `_offset` writes no offset as '0',
--          which needs no tonumber, a strtod of about 1k instructions).
-- Returns: nothing. Defines `fmt(x)` (a number as text that reads back as the
-- same double), `micros(x)` (seconds x as whole microseconds, the score of a
-- small hot zset: an integer keeps a listpack's ZADD/ZREM from parsing every
-- float score, docs/architecture.md, Redis key schema) and, per call, `now` (Redis TIME + offset, epoch seconds),
-- `now_text` (its text, written once: a number passed to redis.call is
-- formatted again at every call; with no offset, TIME's own digits
-- "<seconds>.<6 digits>", which read back as `now`, else fmt(now)) and
-- `now_us` (micros(now)).

local function fmt(x)
  return string.format('%.17g', x)
end

local function micros(x)
  return string.format('%d', math.floor(x * 1000000 + 0.5))
end

local now, now_text, now_us
local function start_clock()
  local t = redis.call('TIME')
  local offset = ARGV[1]
  if offset == '0' then
    -- TIME's two texts make now_text and now_us with no number formatting
    -- (string.format costs a sprintf a number, '%.17g' the most): the
    -- decimal text of seconds.microseconds, and now is what it reads back as.
    local us = t[2]
    if #us < 6 then
      us = string.rep('0', 6 - #us) .. us
    end
    now_text = t[1] .. '.' .. us
    now = tonumber(now_text)
    now_us = t[1] .. us
  else
    now = tonumber(t[1]) + tonumber(t[2]) / 1000000 + tonumber(offset)
    now_text = fmt(now)
    now_us = micros(now)
  end
end
