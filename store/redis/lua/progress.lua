-- progress: record a running job's progress, fenced by its lease token like a
-- heartbeat (JobStore.report_progress).
--
-- KEYS[1]      job hash
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      the status a lease is held in (InProgress)
-- ARGV[3]      lease token held
-- ARGV[4]      the progress as a JSON object without its time,
--              {"fraction": f, "message": m} (store.models.progress_value)
-- Writes the job hash's `progress` field, ARGV[4] with "at": now added (a JSON
-- number, 17 significant digits), only when the job is InProgress with that
-- token; nothing else changes (progress is not a transition: no event, no
-- last_updated_at).
-- Returns:     {1} written, {0, current token, status} refused (nothing
--              written), {-1} no such job
--
-- @include lib/clock.lua

local f = redis.call('HMGET', KEYS[1], 'status', 'lease_token')
if not f[1] then
  return {-1}
end
if tonumber(f[1]) ~= tonumber(ARGV[2]) or tonumber(f[2]) ~= tonumber(ARGV[3]) then
  return {0, f[2], f[1]}
end
redis.call('HSET', KEYS[1], 'progress', string.sub(ARGV[4], 1, -2) .. ',"at":' .. fmt(now) .. '}')
return {1}
