-- record_events: append events that change no job (refused acks, nacks,
-- releases and heartbeats) and count their kinds.
--
-- KEYS[1..9]   common block (lib/job.lua; only KEYS[1], the counters, is written)
-- for event i = 1..n, KEYS[9 + 2i - 1], KEYS[9 + 2i]: job hash, event list
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      events kept per job
-- then 4 values per event, ARGV[3 + 4(i-1)] ...: kind, actor ('' none), token, message
-- An event of a job that no longer exists is dropped.
-- Returns:     one entry per event: 1 recorded, 0 no such job
--
-- @include lib/clock.lua
-- @include lib/job.lua

local out = {}
for i = 1, (#KEYS - 9) / 2 do
  local k, a = 9 + 2 * (i - 1), 3 + 4 * (i - 1)
  if redis.call('EXISTS', KEYS[k + 1]) == 1 then
    append_event(k + 2, ARGV[a], nil, nil, none(ARGV[a + 1]), tonumber(ARGV[a + 2]), ARGV[a + 3])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
