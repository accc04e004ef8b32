-- progress: record the progress of many running jobs, each fenced by its lease
-- token like a heartbeat (JobStore.report_progress_many).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: job:<id>
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      the status a lease is held in (InProgress)
-- ARGV[3i]     report i's job id (i = 1..n)
-- ARGV[1 + 3i] report i's lease token
-- ARGV[2 + 3i] report i's progress as a JSON object without its time,
--              {"fraction": f, "message": m} (store.models.progress_value)
-- Writes a job hash's `progress` field, its report with "at": now added (a
-- JSON number, 17 significant digits), only when the job is InProgress with
-- that token; nothing else changes (progress is not a transition: no event,
-- no last_updated_at).
-- Returns:     one entry per report: {1} written, {0, current token, status}
--              refused (nothing written), {-1} no such job
--
-- @include lib/clock.lua

local held = tonumber(ARGV[2])
local at = ',"at":' .. fmt(now) .. '}'
local out = {}
for i = 1, (#ARGV - 2) / 3 do
  local token, value = tonumber(ARGV[1 + 3 * i]), ARGV[2 + 3 * i]
  local job = P .. 'job:' .. ARGV[3 * i]
  local f = redis.call('HMGET', job, 'status', 'lease_token')
  if not f[1] then
    out[i] = {-1}
  elseif tonumber(f[1]) ~= held or (tonumber(f[2]) or 0) ~= token then
    out[i] = {0, f[2] or '0', f[1]}
  else
    redis.call('HSET', job, 'progress', string.sub(value, 1, -2) .. at)
    out[i] = {1}
  end
end
return out
