-- enqueue: add a chunk of jobs, all or none.
--
-- KEYS[1..9]   common block (lib/job.lua)
-- KEYS[10]     idempotency hash: idempotency key -> job id
-- for job i = 1..n, KEYS[10 + 3i - 2], KEYS[10 + 3i - 1], KEYS[10 + 3i]:
--              job hash, event list, index zset (ready when delay is 0, else scheduled)
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      events kept per job
-- then for each job, in KEYS order:
--              id, queue, status code, priority, delay (s), idempotency key ('' none),
--              m, then m field/value pairs written as they are (name, payload, ...)
-- Returns:     {'ok', now}              written; now is created_at of every job
--              {'replay', created_at}   the first job already exists: a retried call
--                                       whose reply was lost; nothing written again
--              {'duplicate', key, id}   an idempotency key is taken (id '' when it is
--                                       repeated inside the chunk); nothing written
--
-- @include lib/clock.lua
-- @include lib/job.lua

local n = (#KEYS - 10) / 3
local jobs, a = {}, 3
for i = 1, n do
  local m = tonumber(ARGV[a + 6])
  jobs[i] = {
    id = ARGV[a], queue = ARGV[a + 1], status = tonumber(ARGV[a + 2]),
    priority = ARGV[a + 3], delay = tonumber(ARGV[a + 4]), key = none(ARGV[a + 5]),
    first = a + 7, last = a + 6 + 2 * m,
  }
  a = a + 7 + 2 * m
end

if n > 0 and redis.call('EXISTS', KEYS[11]) == 1 then
  return {'replay', redis.call('HGET', KEYS[11], 'created_at')}
end

local seen = {}
for i = 1, n do
  local key = jobs[i].key
  if key then
    if seen[key] then
      return {'duplicate', key, ''}
    end
    seen[key] = true
    local existing = redis.call('HGET', KEYS[10], key)
    if existing then
      return {'duplicate', key, existing}
    end
  end
end

for i = 1, n do
  local job, k = jobs[i], 10 + 3 * (i - 1)
  local due = now + job.delay
  local member = rank(job.priority, due, job.id)
  local fields = {}
  for j = job.first, job.last do
    fields[#fields + 1] = ARGV[j]
  end
  redis.call('HSET', KEYS[k + 1], 'status', job.status, 'due_at', due, 'created_at', now,
    'last_updated_at', now, 'rank', member, unpack(fields))
  if job.delay > 0 then
    redis.call('HSET', KEYS[k + 1], 'retry_delay_until', due)
    redis.call('ZADD', KEYS[k + 3], due, member)
  else
    redis.call('ZADD', KEYS[k + 3], 0, member)
  end
  if job.key then
    redis.call('HSET', KEYS[10], job.key, job.id)
  end
  move(job.id, job.queue, nil, job.status)
  append_event(k + 2, 'enqueued', nil, job.status, nil, 0, nil)
end
return {'ok', fmt(now)}
