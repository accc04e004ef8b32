-- apply_failures: write retry decisions made in Python (lifecycle.decide_failure)
-- as compare-and-set: each job only if it is still InProgress with the same
-- lease token and retry_count the decision was made from (and, for recovery,
-- its lease is still expired). Used by fail (one job) and recovery (a batch).
--
-- KEYS[1..10]  common block (lib/job.lua)
-- KEYS[11..10 + h] history block (lib/job.lua `history_at`): a hash and a zset
--              per bucket width, h keys in all
-- for job i = 1..n, KEYS[10 + h + 4i - 3] .. KEYS[10 + h + 4i]:
--              job hash, event list, scheduled zset of the job's queue,
--              attempts list of the job
-- KEYS[#KEYS - 17 .. #KEYS] listing block (lib/job.lua `listing_last`)
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      operation name, 'fail': its row of the lifecycle table compiled into
--              the library (lib/job.lua `operation`)
--              (its target and event kind are the retry decision's, per job, below)
-- ARGV[5]      1: return each changed job as a flat HGETALL array; 0: return 1
-- ARGV[6..7] history block (lib/job.lua): bucket widths, kinds counted
-- then 11 values per job, ARGV[8 + 11(i-1)] ...:
--              id, token, expected retry_count, new status, new retry_count,
--              delay s ('' when the job ends Failed),
--              error JSON (traceback already cut to MAX_TRACEBACK_CHARS),
--              expired (1: recovery, guard lease_expires_at < now and count a
--              lease expiration; 0: a handler failure), event kind, event
--              message, actor ('' none)
-- Besides FAIL's row, the decision's fields are written here: a rescheduled
-- job gets retry_delay_until = due_at = now + delay (completed_at deleted) and
-- goes to the scheduled zset; a failed one gets due_at = completed_at = now
-- (retry_delay_until deleted). The failed attempt is appended to the job's
-- attempts list as JSON: attempt (retry_count before + 1), token, worker_id
-- and started_at (from the job hash), error (the JSON text of ARGV),
-- finished_at = now; times as text, like events (lib/job.lua). The event is
-- counted in the history buckets of the job's queue.
-- Returns:     one entry per job: 0 guard missed (nothing written), else 1 or the job
--
-- @include lib/clock.lua
-- @include lib/job.lua

local op = operation(ARGV[4])
local want_jobs = ARGV[5] == '1'
local h = history_at(11, 6)
local l = listing_last()
local out = {}
for i = 1, (#KEYS - 10 - h - l) / 4 do
  local k, a = 10 + h + 4 * (i - 1), 8 + 11 * (i - 1)
  local id, token, expected = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local target, retries, delay = tonumber(ARGV[a + 3]), ARGV[a + 4], tonumber(ARGV[a + 5])
  local expired = tonumber(ARGV[a + 7])
  local f = redis.call('HMGET', KEYS[k + 1], 'status', 'lease_token', 'retry_count', 'lease_expires_at',
    'queue', 'priority', 'lease_expirations', 'worker_id', 'started_at')
  local old = tonumber(f[1])
  local ok = old and op.sources[old] and tonumber(f[2]) == token and tonumber(f[3]) == expected
  if ok and expired == 1 then
    ok = tonumber(f[4]) ~= nil and tonumber(f[4]) < now
  end
  if not ok then
    out[i] = 0
  else
    move(k + 1, id, f[5], old, target)
    local written = {'retry_count', retries, 'error', ARGV[a + 6], 'lease_expirations', tonumber(f[7]) + expired}
    if delay then
      local due = now + delay
      local member = rank(f[6], due, id)
      change(k + 1, op, target, {'retry_delay_until', due, 'due_at', due, 'rank', member, unpack(written)},
        {'completed_at'})
      redis.call('ZADD', KEYS[k + 3], due, member)
    else
      change(k + 1, op, target, {'due_at', now, 'completed_at', now, unpack(written)}, {'retry_delay_until'})
    end
    redis.call('RPUSH', KEYS[k + 4], cjson.encode({
      attempt = tonumber(f[3]) + 1, token = token, worker_id = f[8] or nil, error = ARGV[a + 6],
      started_at = f[9] or nil, finished_at = fmt(now),
    }))
    redis.call('ZREM', KEYS[9], id)
    append_event(k + 2, id, ARGV[a + 8], old, target, none(ARGV[a + 10]), token, ARGV[a + 9])
    count_history(f[5], ARGV[a + 8])
    if want_jobs then
      out[i] = redis.call('HGETALL', KEYS[k + 1])
    else
      out[i] = 1
    end
  end
end
flush_counts()
return out
