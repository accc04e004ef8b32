-- enqueue: add a chunk of jobs, all or none.
--
-- KEYS[1..10]  common block (lib/job.lua)
-- KEYS[11]     idempotency hash: idempotency key -> job id
-- KEYS[12]     unique hash: unique key -> id of the job holding it
-- KEYS[13]     unique-until hash: unique key -> epoch seconds (created_at +
--              unique_for) until which it stays held after its job finished
-- KEYS[14..13 + h] history block (lib/job.lua `history_at`): a hash and a zset
--              per bucket width, h keys in all
-- for job i = 1..n, KEYS[13 + h + 4i - 3] .. KEYS[13 + h + 4i]:
--              job hash, event list, index zset (ready when delay is 0, else
--              scheduled), wake-up list of its queue (store/redis/wakeups.py)
-- KEYS[#KEYS - 5 .. #KEYS] listing block of Queued and Scheduled (lib/job.lua
--              `listing_last(100, 200)`)
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      most wake-up entries kept per queue: each queue that got a ready
--              (undelayed) job gets one entry on its wake-up list, the job's
--              ready member when the call made one job of that queue ready,
--              else '*' (a worker's blocking pop hands it to one idle worker)
-- ARGV[5]      event kind of each new job's first event (EventKind.ENQUEUED)
-- ARGV[6]      statuses that hold a unique key whatever its age ("100 200 300")
-- ARGV[7..8]   history block (lib/job.lua): bucket widths, kinds counted
-- then 16 values per job, ARGV[9 + 16(i-1)] ...: status code, delay (s),
--              unique_for (s, '' for none), and the hash fields of FIELDS below
--              in that order (store/redis/codec.py, ENQUEUE_FIELDS); '' leaves
--              an optional field out (null)
-- Writes each job hash with status, due_at = now + delay, created_at,
-- last_updated_at, retry_delay_until (delayed jobs), rank and zero counters; a
-- job with a unique_key takes that key (KEYS[12], KEYS[13]). Each new job is
-- counted in the history buckets of its queue.
-- A unique key is held while its job exists with a status of ARGV[6] (read
-- from the updated:<status> zsets) or now < its unique-until time.
-- Returns:     {'ok', now}              written; now is created_at of every job
--              {'replay', created_at}   the first job already exists: a retried call
--                                       whose reply was lost; nothing written again
--              {'duplicate', key, id}   an idempotency key is taken (id '' when it is
--                                       repeated inside the chunk); nothing written
--              {'unique', key, id}      a unique key is held by job id (id '' when it
--                                       is repeated inside the chunk); nothing written
--
-- @include lib/clock.lua
-- @include lib/job.lua

local FIELDS = {
  'id', 'name', 'queue', 'priority', 'max_retries', 'timeout_seconds', 'lease_ttl_seconds',
  'idempotency_key', 'payload', 'headers', 'route_params', 'query_params', 'unique_key',
}
local PER_JOB = 3 + #FIELDS
local AT = {status = 0, delay = 1, unique_for = 2}  -- offset of each value within a job's ARGV
for j, field in ipairs(FIELDS) do
  AT[field] = 2 + j
end
local h = history_at(14, 7)
local n = (#KEYS - 13 - h - listing_last(100, 200)) / 4
local holding = status_set(ARGV[6])

-- The value of `name` in job i's ARGV.
local function arg(i, name)
  return ARGV[9 + PER_JOB * (i - 1) + AT[name]]
end

-- The id of the job still holding unique key `key`, or nil when it is free.
local function holder(key)
  local id = redis.call('HGET', KEYS[12], key)
  if not id or not redis.call('ZSCORE', KEYS[2], id) then
    return nil  -- never taken, or its job was removed
  end
  for code in pairs(holding) do
    if redis.call('ZSCORE', KEYS[2 + code / 100], id) then
      return id
    end
  end
  if now < tonumber(redis.call('HGET', KEYS[13], key) or '0') then
    return id
  end
  return nil
end

if n > 0 and redis.call('EXISTS', KEYS[14 + h]) == 1 then
  return {'replay', redis.call('HGET', KEYS[14 + h], 'created_at')}
end

local seen, seen_unique, ready = {}, {}, {}
for i = 1, n do
  local key = none(arg(i, 'idempotency_key'))
  if key then
    if seen[key] then
      return {'duplicate', key, ''}
    end
    seen[key] = true
    local existing = redis.call('HGET', KEYS[11], key)
    if existing then
      return {'duplicate', key, existing}
    end
  end
end
for i = 1, n do
  local key = none(arg(i, 'unique_key'))
  if key then
    if seen_unique[key] then
      return {'unique', key, ''}
    end
    seen_unique[key] = true
    local id = holder(key)
    if id then
      return {'unique', key, id}
    end
  end
end

for i = 1, n do
  local k = 13 + h + 4 * (i - 1)
  local id, queue, key = arg(i, 'id'), arg(i, 'queue'), none(arg(i, 'idempotency_key'))
  local status, delay = tonumber(arg(i, 'status')), tonumber(arg(i, 'delay'))
  local due = now + delay
  local member = rank(arg(i, 'priority'), due, id)
  local hash = {
    'status', status, 'due_at', due, 'created_at', now_text, 'last_updated_at', now_text, 'rank', member,
    'retry_count', 0, 'lease_expirations', 0, 'lease_token', 0,
  }
  for _, field in ipairs(FIELDS) do
    local value = arg(i, field)
    if value ~= '' then
      hash[#hash + 1] = field
      hash[#hash + 1] = value
    end
  end
  if delay > 0 then
    hash[#hash + 1] = 'retry_delay_until'
    hash[#hash + 1] = due
    redis.call('ZADD', KEYS[k + 3], due, member)
  else
    redis.call('ZADD', KEYS[k + 3], 0, member)
    ready[queue] = {list = k + 4, member = ready[queue] == nil and member or '*'}
  end
  redis.call('HSET', KEYS[k + 1], unpack(hash))
  if key then
    redis.call('HSET', KEYS[11], key, id)
  end
  local unique = none(arg(i, 'unique_key'))
  if unique then
    redis.call('HSET', KEYS[12], unique, id)
    redis.call('HSET', KEYS[13], unique, fmt(now + (tonumber(arg(i, 'unique_for')) or 0)))
  end
  move(k + 1, id, queue, nil, status, arg(i, 'name'))
  append_event(k + 2, id, ARGV[5], nil, status, nil, 0, nil)
  count_history(queue, ARGV[5])
end
flush_counts()
local kept = tonumber(ARGV[4])
for _, wake in pairs(ready) do
  -- Past `kept` entries, the newest half stays (one LTRIM per kept/2 pushes
  -- while no worker pops).
  if redis.call('RPUSH', KEYS[wake.list], wake.member) > kept then
    redis.call('LTRIM', KEYS[wake.list], -math.floor(kept / 2), -1)
  end
end
return {'ok', now_text}
