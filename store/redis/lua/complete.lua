-- complete: ack one or many jobs, each guarded on its own by status and token.
--
-- KEYS[1..10]  common block (lib/job.lua)
-- KEYS[11..10 + h] history block (lib/job.lua `history_at`): a hash and a zset
--              per bucket width, h keys in all
-- for ack i = 1..n, KEYS[10 + h + 2i - 1], KEYS[10 + h + 2i]: job hash, event list
-- KEYS[#KEYS - 5 .. #KEYS] listing block of InProgress and Completed (lib/job.lua
--              `listing_last(300, 400)`)
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      operation name, 'complete': its row of the lifecycle table compiled into
--              the library (lib/job.lua `operation`)
-- ARGV[5]      actor (worker id, '' for none)
-- ARGV[6]     1: return each completed job; 0: do not (a worker's acks)
-- ARGV[7..8] history block (lib/job.lua): bucket widths, kinds counted
-- then 3 values per ack, ARGV[9 + 3(i-1)] ...: job id, lease token held,
--              result JSON (written to the `result` field)
-- Each completion is counted in the history buckets of its queue.
-- Returns:     one entry per ack: {1, job as a flat HGETALL array} completed
--              ({1} when ARGV[6] is 0), {0, current token, status} refused
--              (nothing written), {-1} no such job
--
-- @include lib/clock.lua
-- @include lib/job.lua

local op = operation(ARGV[4])
local actor, want_jobs = none(ARGV[5]), ARGV[6] == '1'
local h = history_at(11, 7)
local l = listing_last(300, 400)
local out = {}
for i = 1, (#KEYS - 10 - h - l) / 2 do
  local k, a = 10 + h + 2 * (i - 1), 9 + 3 * (i - 1)
  local id, token = ARGV[a], tonumber(ARGV[a + 1])
  local f = redis.call('HMGET', KEYS[k + 1], 'status', 'lease_token', 'queue')
  local old = tonumber(f[1])
  if not old then
    out[i] = {-1}
  elseif not op.sources[old] or tonumber(f[2]) ~= token then
    out[i] = {0, f[2], f[1]}
  else
    move(k + 1, id, f[3], old, op.target)
    change(k + 1, op, op.target, {'result', ARGV[a + 2]})
    redis.call('ZREM', KEYS[9], id)
    append_event(k + 2, id, op.event, old, op.target, actor, token, nil)
    count_history(f[3], op.event)
    if want_jobs then
      out[i] = {1, redis.call('HGETALL', KEYS[k + 1])}
    else
      out[i] = {1}
    end
  end
end
flush_counts()
return out
