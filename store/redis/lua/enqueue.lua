-- enqueue: add a chunk of jobs, all or none.
--
-- KEYS[1]      the prefix (lib/keys.lua); every key is built from it: per job
--              job:<id>, events:<id>, ready:<queue> (no delay) or
--              scheduled:<queue>, wakeup:<queue> (store/redis/wakeups.py),
--              idle:<queue> and hand:<worker> (lib/hand_over.lua `hand_over`); and
--              idempotency, unique, unique_until, counters, history, listing zsets,
--              queue_names
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4..]    per job: status code, delay (s, '0' for none), the ENQUEUE_FIXED
--              fields (id, name, queue, max_retries, timeout_seconds), the
--              letters of the ENQUEUE_OPTIONAL values the job has ('a' the
--              first: priority ... unique_key, then unique_for, seconds, not
--              a hash field), then those values in that order
--              (store/redis/codec.py enqueue_values; the layout compiled in
--              by store/redis/scripts.py enqueue_table); an optional value
--              left out is absent from the hash (null; priority 0)
-- Compiled in: the enqueue row of the lifecycle table (the event kind, the
-- stamped, zeroed, delayed and held fields), UNIQUE_HOLDING (the statuses
-- that hold a unique key whatever its age) and FLOW.wakeup_kept.
-- Each queue that got ready (undelayed) jobs first hands up to HAND_MOST of
-- them to idle workers registered on it (lib/hand_over.lua `hand_over`: leased,
-- pushed on hand:<worker>); if any is left, the queue gets one entry on its
-- wake-up list (kept to FLOW.wakeup_kept, store/redis/wakeups.py
-- WAKEUP_KEPT), the job's ready member when the call made one job of that
-- queue ready, else '*' (a worker's blocking pop hands it to one idle worker).
-- Writes each job hash with status, rank, enqueued_as (its enqueued event,
-- lib/job.lua `happen`) and the fields of the row: stamps = now, zeroes
-- absent (read as 0), delays = now + delay and held = the same for a delayed
-- job (none for another: they would equal created_at); no id (the key's)
-- and no last_updated_at (absent: created_at; store/redis/layout.py 6); a
-- job with a unique_key takes that key (unique, unique_until). Each new job is
-- counted in the history buckets of its queue.
-- A unique key is held while its job exists with a status of UNIQUE_HOLDING (read
-- from its hash) or now < its unique-until time (lib/enqueue_keys.lua).
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

-- Load section (store/redis/scripts.py): the argument layout, built once.
-- A job's values start at its base b: ARGV[b] status, ARGV[b + 1] delay,
-- ARGV[b + 1 + j] the j-th ENQUEUE_FIXED field, ARGV[b + LETTERS] the letters
-- of its optional values, ARGV[b + LETTERS + k] the value of its k-th letter.
-- (A job with none costs no call: most jobs; an ARGV element costs the
-- server about 400 instructions, an empty one too.)
local FIXED_AT = {}
for j = 1, #ENQUEUE_FIXED do
  FIXED_AT[ENQUEUE_FIXED[j]] = 1 + j
end
-- The fixed fields written to the hash, each with its offset from the base:
-- all but the id, which the key holds (layout 6, store/redis/layout.py).
local STORED, STORED_AT = {}, {}
for j = 1, #ENQUEUE_FIXED do
  if ENQUEUE_FIXED[j] ~= 'id' then
    STORED[#STORED + 1], STORED_AT[#STORED_AT + 1] = ENQUEUE_FIXED[j], 1 + j
  end
end
local ID, QUEUE, NAME = FIXED_AT['id'], FIXED_AT['queue'], FIXED_AT['name']
local LETTERS = #ENQUEUE_FIXED + 2
-- The byte of the letter of each optional value enqueue reads itself
-- (ENQUEUE_BYTE; ENQUEUE_FIELD gives a letter's field by its byte).
local PRIORITY, IDEMPOTENCY, UNIQUE, UNIQUE_FOR = ENQUEUE_BYTE['priority'], ENQUEUE_BYTE['idempotency_key'],
  ENQUEUE_BYTE['unique_key'], ENQUEUE_BYTE['unique_for']
-- Most jobs of a queue one call hands over to idle workers (lib/claim.lua
-- `hand_over`); the rest wait for a claim.
local HAND_MOST = 8
local NO_OPTIONS = {}
local ENQUEUE = OPERATIONS['enqueue']
-- Where the first job's values start (after the three common values).
local FIRST = 4

-- The optional values of the job at base `b` by their letter's byte, or
-- nil when it has none (most jobs: no table, no call).
local function options(b)
  local letters = ARGV[b + LETTERS]
  if letters == '' then
    return nil
  end
  local found = {}
  for k = 1, #letters do
    found[string.byte(letters, k)] = ARGV[b + LETTERS + k]
  end
  return found
end

-- @call
local op = ENQUEUE
local bases, opts, n, b = {}, {}, 0, FIRST  -- each job's base and options
local last = #ARGV
while b <= last do
  n = n + 1
  bases[n], opts[n] = b, options(b)
  b = b + LETTERS + #ARGV[b + LETTERS] + 1
end

if n > 0 then
  local first = P .. 'job:' .. ARGV[FIRST + ID]
  if redis.call('EXISTS', first) == 1 then
    return {'replay', redis.call('HGET', first, 'created_at')}
  end
end

local taken = keys_taken(n, opts)  -- lib/enqueue_keys.lua
if taken then
  return taken
end

-- The row's zeroes are not written: an absent retry_count, lease_token or
-- lease_expirations reads as 0 in every reader (Lua `tonumber(x) or 0`,
-- store/redis/codec.py job_from_hash), as an absent priority does.
local stamps, delays, held = op.stamps, op.delays, op.held
local ready = {}
for i = 1, n do
  local base, opt = bases[i], opts[i] or NO_OPTIONS
  local id, queue = ARGV[base + ID], ARGV[base + QUEUE]
  -- texts read without a strtod where they can be (about 1k instructions each)
  local status, delay = STATUS_CODE[ARGV[base]], ARGV[base + 1]
  delay = delay == '0' and 0 or tonumber(delay)
  local letters = ARGV[base + LETTERS]
  local member = rank(opt[PRIORITY], now + delay, id)
  local code = STATUS_TEXT[status]
  local due_text = delay > 0 and fmt(now + delay) or now_text
  -- Left out (layout 6): last_updated_at (created_at until the job
  -- changes), the delays when there is none (equal to created_at), the id.
  local hash = {'status', code, 'rank', member, 'enqueued_as', code}
  local h = #hash
  for k = 1, #stamps do
    hash[h + 1], hash[h + 2], h = stamps[k], now_text, h + 2
  end
  if delay > 0 then
    for k = 1, #delays do
      hash[h + 1], hash[h + 2], h = delays[k], due_text, h + 2
    end
  end
  for k = 1, #STORED do
    hash[h + 1], hash[h + 2], h = STORED[k], ARGV[base + STORED_AT[k]], h + 2
  end
  if letters ~= '' then
    for k = 1, #letters do
      local field = ENQUEUE_FIELD[string.byte(letters, k)]
      if field ~= 'unique_for' then
        hash[h + 1], hash[h + 2], h = field, ARGV[base + LETTERS + k], h + 2
      end
    end
  end
  if delay > 0 then
    for k = 1, #held do
      hash[h + 1], hash[h + 2], h = held[k], due_text, h + 2
    end
    redis.call('ZADD', P .. 'scheduled:' .. queue, due_text, member)
  else
    redis.call('ZADD', P .. 'ready:' .. queue, '0', member)
    local made = ready[queue]
    if made == nil then
      ready[queue] = {n = 1, member}
    else
      made.n = made.n + 1
      if made.n <= HAND_MOST then
        made[made.n] = member
      end
    end
  end
  redis.call('HSET', P .. 'job:' .. id, unpack(hash))
  local key = opt[IDEMPOTENCY]
  if key then
    redis.call('HSET', P .. 'idempotency', key, id)
  end
  local unique = opt[UNIQUE]
  if unique then
    redis.call('HSET', P .. 'unique', unique, id)
    redis.call('HSET', P .. 'unique_until', unique, fmt(now + (tonumber(opt[UNIQUE_FOR]) or 0)))
  end
  move(id, queue, nil, status, ARGV[base + NAME])
  happen(id, op.event, nil, status, nil, 0)
  count_history(queue, op.event)
end
local kept = FLOW.wakeup_kept
for queue, made in pairs(ready) do
  local left = made.n - hand_over(queue, made)
  if left > 0 then
    -- Past `kept` entries, the newest half stays (one LTRIM per kept/2 pushes
    -- while no worker pops).
    local wakeup = P .. 'wakeup:' .. queue
    if redis.call('RPUSH', wakeup, made.n == 1 and made[1] or '*') > kept then
      redis.call('LTRIM', wakeup, string.format('%d', -math.floor(kept / 2)), '-1')
    end
  end
end
flush_counts()
return {'ok', now_text}
