-- record_events: append events that change no job (refused acks, nacks,
-- releases and heartbeats) and count their kinds.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: job:<id>, events:<id>,
--              counters, audit
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- then 5 values per event, ARGV[4 + 5(i-1)] ...: job id, kind, actor ('' none),
--              token, message
-- An event of a job that no longer exists is dropped.
-- Returns:     one entry per event: 1 recorded, 0 no such job
--
-- @include lib/clock.lua
-- @include lib/job.lua

local out = {}
for i = 1, (#ARGV - 3) / 5 do
  local a = 4 + 5 * (i - 1)
  if redis.call('EXISTS', P .. 'job:' .. ARGV[a]) == 1 then
    settle(ARGV[a])
    append_event(ARGV[a], ARGV[a + 1], nil, nil, none(ARGV[a + 2]), tonumber(ARGV[a + 3]), ARGV[a + 4])
    out[i] = 1
  else
    out[i] = 0
  end
end
flush_counts()
return out
