-- apply_failures: write retry decisions made in Python (lifecycle.decide_failure)
-- as compare-and-set: each job only if it is still InProgress with the same
-- lease token and retry_count the decision was made from (and, for recovery,
-- its lease is still expired). Used by fail (one job) and recovery (a batch).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: job:<id>, events:<id>,
--              attempts:<id>, scheduled:<queue>, leases, counters, history, updated
--              and listing zsets
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      operation name, 'fail': its row of the lifecycle table compiled into
--              the library (lib/job.lua `operation`)
--              (its target and event kind are the retry decision's, per job, below)
-- ARGV[5]      1: return each changed job as a flat HGETALL array; 0: return 1
-- then 11 values per job, ARGV[6 + 11(i-1)] ...
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
-- counted in the history buckets of the job's queue, a handler failure
-- (expired 0) in its handler's minute bucket (lib/handler_minutes.lua).
-- A job of a limited queue leaves its running count (lib/flow.lua
-- `flow.left`); one with children that ends Failed cancels or releases those
-- waiting for it (`flow.finished`); a retried one keeps them waiting.
-- Returns:     one entry per job: 0 guard missed (nothing written), else 1 or the job
--
-- @include lib/clock.lua
-- @include lib/job.lua

local op = operation(ARGV[4])
local want_jobs = ARGV[5] == '1'
local out = {}
for i = 1, (#ARGV - 5) / 11 do
  local a = 6 + 11 * (i - 1)
  local id, token, expected = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local target, retries, delay = tonumber(ARGV[a + 3]), ARGV[a + 4], tonumber(ARGV[a + 5])
  local expired = tonumber(ARGV[a + 7])
  local job = P .. 'job:' .. id
  local f = redis.call('HMGET', job, 'status', 'lease_token', 'retry_count', 'lease_expires_at',
    'queue', 'priority', 'lease_expirations', 'worker_id', 'started_at', 'counted', 'has_children', 'name')
  local old = tonumber(f[1])
  local ok = old and op.sources[old] and (tonumber(f[2]) or 0) == token and (tonumber(f[3]) or 0) == expected
  if ok and expired == 1 then
    ok = tonumber(f[4]) ~= nil and tonumber(f[4]) < now
  end
  if not ok then
    out[i] = 0
  else
    settle(id)
    move(id, f[5], old, target)
    local written = {'retry_count', retries, 'error', ARGV[a + 6], 'lease_expirations', (tonumber(f[7]) or 0) + expired}
    if delay then
      local due = now + delay
      local member = rank(f[6], due, id)
      change(id, op, target, {'retry_delay_until', due, 'due_at', due, 'rank', member, unpack(written)},
        {'completed_at'})
      redis.call('ZADD', P .. 'scheduled:' .. f[5], due, member)
    else
      change(id, op, target, {'due_at', now, 'completed_at', now, unpack(written)}, {'retry_delay_until'})
    end
    redis.call('RPUSH', P .. 'attempts:' .. id, cjson.encode({
      attempt = (tonumber(f[3]) or 0) + 1, token = token, worker_id = f[8] or nil, error = ARGV[a + 6],
      started_at = f[9] or nil, finished_at = fmt(now),
    }))
    redis.call('ZREM', P .. 'leases', id)
    append_event(id, ARGV[a + 8], old, target, none(ARGV[a + 10]), token, ARGV[a + 9])
    if f[10] then
      flow.left(id, f[5], f[10])
    end
    if f[11] and not delay then
      flow.finished(id, target, none(ARGV[a + 10]))
    end
    count_history(f[5], ARGV[a + 8])
    if expired == 0 then  -- a handler's failure (a lease that expired is no handler outcome)
      count_handler(f[12], delay and HM.retried or HM.failed, f[9] and now - tonumber(f[9]))
    end
    if want_jobs then
      out[i] = redis.call('HGETALL', job)
    else
      out[i] = 1
    end
  end
end
flush_counts()
flush_handler_minutes()
return out
