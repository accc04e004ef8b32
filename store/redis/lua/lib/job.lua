-- lib/job.lua: helpers of the functions that change jobs, a section of the
-- library's top level after lib/clock.lua (store/redis/scripts.py); a function
-- whose file has `-- @include lib/job.lua` runs start_job() before its body.
-- Every such function passes this common block first
-- (store/redis/keys.py, Keys.common; store/redis/plumbing.py, _args):
--
-- KEYS[1]      counters hash: "s:<status>:<queue>" job counts, "e:<kind>" event totals,
--              "q:<kind>:<queue>" event totals per queue (history kinds only)
-- KEYS[2]      updated zset: every job, score last_updated_at, member id
-- KEYS[3..8]   updated:<status> zsets for statuses 100..600: KEYS[2 + status / 100]
-- KEYS[9]      leases zset: InProgress jobs, score lease_expires_at, member id
-- KEYS[10]     audit list: events whose actor starts with "operator:", newest first
-- ARGV[1]      clock offset, seconds (lib/clock.lua)
-- ARGV[2]      events kept per job (each job's event list is trimmed to this many)
-- ARGV[3]      entries kept in the audit list
-- A function of an operation passes the operation's name (an Operation value,
-- store/redis/plumbing.py op_args); `operation(name)` returns its row of the
-- lifecycle table compiled into the library (OPERATIONS: sources, target,
-- event, stamps, clears).
-- Scripts that remove jobs (purge, delete) also pass, for `remove_job`:
-- KEYS[11]     idempotency hash: idempotency key -> job id
-- KEYS[12]     unique hash: unique key -> id of the job holding it
-- KEYS[13]     unique-until hash: unique key -> epoch seconds it is held to
-- Scripts that append events of store/counters.py HISTORY_KINDS (enqueue,
-- complete, apply_failures) also pass a history block, found by
-- `history_at(k, a)` (which returns how many keys it takes):
-- KEYS[k + 2w - 2], KEYS[k + 2w - 1] for width w = 1..n: the history hash
--              ("<bucket start>|<queue>|<kind>" -> events) and history zset
--              (member the same field, score its bucket start) of width w
-- ARGV[a]      bucket widths, seconds, space-separated ("60 3600"), in KEYS order
-- ARGV[a + 1]  event kinds counted (HISTORY_KINDS), space-separated
-- Scripts that change a job's status or remove jobs (`move`, `remove_job`)
-- pass the listing block as their last keys (`listing_last(low, high)`, which
-- returns how many: 3 per status of low..high, default 100..600, the statuses
-- the script may touch): for status s = low..high and
-- j = #KEYS - (that count) + 1 + 3(s - low)/100,
-- KEYS[j], KEYS[j + 1], KEYS[j + 2]: the jobs of status s by queue, by name,
--              and by queue and name: zsets, every score 0, members
--              "<queue>\0<at>:<id>", "<name>\0<at>:<id>", "<queue>\0<name>\0<at>:<id>"
--              with <at> = %017d of last_updated_at in microseconds, so byte
--              order within one queue/name is (last_updated_at, id), the
--              order of listings (store/redis/listing.py reads them BYLEX)
-- Returns: nothing. Defines start_job, status_set, none, words, operation, rank,
-- status_counter, event_counter, queue_event_counter, count, history_at, count_history,
-- flush_counts, listing_last, move, change, operator_guard, unqueue, append_event,
-- audit_event, remove_job. A function that counts calls flush_counts() once,
-- before it returns.

local EVENTS_KEPT, AUDIT_KEPT

-- "100 200" -> {[100] = true, [200] = true}: the statuses a guard accepts.
local function status_set(text)
  local set = {}
  for code in string.gmatch(text, '%d+') do
    set[tonumber(code)] = true
  end
  return set
end

-- '' -> nil (ARGV cannot carry nil).
local function none(text)
  if text == '' then
    return nil
  end
  return text
end

-- "a b" -> {'a', 'b'}.
local function words(text)
  local list = {}
  for word in string.gmatch(text, '%S+') do
    list[#list + 1] = word
  end
  return list
end

-- The row of operation `name` (an Operation value, e.g. 'claim') of the
-- lifecycle table compiled into the library (OPERATIONS, store/redis/scripts.py).
local function operation(name)
  local op = OPERATIONS[name]
  if not op then
    error('unknown operation ' .. tostring(name))
  end
  return op
end

-- Member of a ready/scheduled zset: priority descending (1000000 is
-- store.models.MAX_PRIORITY), due time ascending in microseconds, then id.
-- Ready zsets keep every score 0, so byte order of the member is claim order.
local function rank(priority, due, id)
  return string.format('%07d%017d:%s', 1000000 - tonumber(priority), math.floor(due * 1000000 + 0.5), id)
end

-- Counter keys of the counters hash; store/counters.py (status_key,
-- event_key) writes the same text in Python.
local function status_counter(status, queue)
  return 's:' .. status .. ':' .. queue
end
local function event_counter(kind)
  return 'e:' .. kind
end
local function queue_event_counter(kind, queue)
  return 'q:' .. kind .. ':' .. queue
end

-- Counter deltas of this call, written once by flush_counts (one HINCRBY per
-- counter instead of one per job and event).
local deltas = {}
local function count(field, n)
  deltas[field] = (deltas[field] or 0) + n
end

-- History: events of a counted kind per queue in this call, written once by
-- flush_counts into the current bucket of every width (one HINCRBY per width,
-- queue and kind, not per job, and a ZADD when that made a new field).
-- Inactive until history_at.
local history = {first = nil, widths = {}, kinds = {}}
local history_deltas = {}
local function history_at(k, a)
  history.first = k
  for _, width in ipairs(words(ARGV[a])) do
    history.widths[#history.widths + 1] = tonumber(width)
  end
  for _, kind in ipairs(words(ARGV[a + 1])) do
    history.kinds[kind] = true
  end
  return 2 * #history.widths
end
local function count_history(queue, kind)
  if history.kinds[kind] then
    local field = queue .. '|' .. kind
    history_deltas[field] = (history_deltas[field] or 0) + 1
    count(queue_event_counter(kind, queue), 1)
  end
end

local function flush_counts()
  for field, n in pairs(deltas) do
    if n ~= 0 then
      redis.call('HINCRBY', KEYS[1], field, n)
    end
  end
  deltas = {}
  for w, width in ipairs(history.widths) do
    local bucket = fmt(math.floor(now / width) * width)
    for field, n in pairs(history_deltas) do
      local member = bucket .. '|' .. field
      -- The zset (for trimming) learns a field once: when this call made it.
      if redis.call('HINCRBY', KEYS[history.first + 2 * w - 2], member, n) == n then
        redis.call('ZADD', KEYS[history.first + 2 * w - 1], bucket, member)
      end
    end
  end
  history_deltas = {}
end

-- The listing block (see the header): inactive until listing_last.
local listing = {first = nil, low = 100, high = 600}
local function listing_last(low, high)
  listing.low, listing.high = low or 100, high or 600
  local n = 3 * ((listing.high - listing.low) / 100 + 1)
  listing.first = #KEYS - n + 1
  return n
end

-- Add (ZADD) or remove (ZREM) job `id` of status `status`, last updated
-- `at`, in the listing block's zsets of that status.
local now_us  -- %017d of now in microseconds, made by the first list_job at now
local function list_job(command, status, queue, name, at, id)
  local us
  if at == now_text then
    now_us = now_us or string.format('%017d', math.floor(now * 1000000 + 0.5))
    us = now_us
  else
    us = string.format('%017d', math.floor(tonumber(at) * 1000000 + 0.5))
  end
  local tail = us .. ':' .. id
  if status < listing.low or status > listing.high then
    error('status ' .. status .. ' is outside the listing block passed')
  end
  local j = listing.first + 3 * ((status - listing.low) / 100)
  local members = {queue .. '\0' .. tail, name .. '\0' .. tail, queue .. '\0' .. name .. '\0' .. tail}
  if command == 'ZADD' then
    redis.call('ZADD', KEYS[j], 0, members[1])
    redis.call('ZADD', KEYS[j + 1], 0, members[2])
    redis.call('ZADD', KEYS[j + 2], 0, members[3])
  else
    redis.call('ZREM', KEYS[j], members[1])
    redis.call('ZREM', KEYS[j + 1], members[2])
    redis.call('ZREM', KEYS[j + 2], members[3])
  end
end

-- Index and count job `id` (hash KEYS[hash]) of `queue` under status `new`,
-- last updated now: out of the `old` status's zsets (`old` nil for a new job,
-- whose `name` is then given). Call it before `change`: it reads the job's
-- name and previous last_updated_at from the hash.
local function move(hash, id, queue, old, new, name)
  if old then
    local f = redis.call('HMGET', KEYS[hash], 'name', 'last_updated_at')
    name = f[1]
    redis.call('ZREM', KEYS[2 + old / 100], id)
    list_job('ZREM', old, queue, name, f[2], id)
    count(status_counter(old, queue), -1)
  end
  redis.call('ZADD', KEYS[2 + new / 100], now_text, id)
  redis.call('ZADD', KEYS[2], now_text, id)
  list_job('ZADD', new, queue, name, now_text, id)
  count(status_counter(new, queue), 1)
end

-- The job-hash change of operation `op` on the hash KEYS[hash]: status =
-- `target`, last_updated_at and every field of op.stamps = now, every field of
-- op.clears deleted. `set` (field, value, ...) and `drop` (fields) are the
-- script's own writes: the operation's written fields and Redis bookkeeping
-- (`rank`).
local function change(hash, op, target, set, drop)
  local fields = {'status', target, 'last_updated_at', now_text}
  for _, field in ipairs(op.stamps) do
    fields[#fields + 1] = field
    fields[#fields + 1] = now_text
  end
  for _, value in ipairs(set or {}) do
    fields[#fields + 1] = value
  end
  redis.call('HSET', KEYS[hash], unpack(fields))
  local gone = {unpack(op.clears)}
  for _, field in ipairs(drop or {}) do
    gone[#gone + 1] = field
  end
  if #gone > 0 then
    redis.call('HDEL', KEYS[hash], unpack(gone))
  end
end

-- The guarded read of an operator action: the fields 'status', ... of job hash
-- KEYS[hash], or nil and the script's reply when there is no such job ({-1})
-- or its status is no longer `expected`, the one the caller read and checked
-- against op.sources ({0, status}: the caller reads again).
local function operator_guard(hash, op, expected, ...)
  local f = redis.call('HMGET', KEYS[hash], 'status', ...)
  if not f[1] then
    return nil, {-1}
  end
  local old = tonumber(f[1])
  if old ~= expected or not op.sources[old] then
    return nil, {0, f[1]}
  end
  return f
end

-- Take a job's `member` (its rank; nil when it has none) out of its queue's
-- ready and scheduled zsets, KEYS[ready] and KEYS[scheduled].
local function unqueue(member, ready, scheduled)
  if member then
    redis.call('ZREM', KEYS[ready], member)
    redis.call('ZREM', KEYS[scheduled], member)
  end
end

-- A new event (a table; encode_event leaves nil fields out).
local function new_event(kind, from, to, actor, token, message)
  return {
    at = now_text, kind = kind, from = from, to = to,
    actor = actor, token = token, message = message,
  }
end

-- The JSON object of `event` (store/redis/codec.py, event_from_json, reads
-- it), written field by field: a third of the cost of cjson.encode(event),
-- which walks the table and formats every number. Texts go through
-- cjson.encode (escaping); from, to and token are integers; at is now_text.
local EVENT_INTEGERS, EVENT_TEXTS = {'from', 'to', 'token'}, {'actor', 'message', 'job'}
local function encode_event(event)
  local out = {'{"at":"', event.at, '","kind":', cjson.encode(event.kind)}
  for _, field in ipairs(EVENT_INTEGERS) do
    if event[field] then
      out[#out + 1] = ',"' .. field .. '":' .. string.format('%d', event[field])
    end
  end
  for _, field in ipairs(EVENT_TEXTS) do
    if event[field] then
      out[#out + 1] = ',"' .. field .. '":' .. cjson.encode(event[field])
    end
  end
  out[#out + 1] = '}'
  return table.concat(out)
end

-- Count `event`'s kind and, when its actor is an operator, copy it with job
-- id `id` ('' when no job: a queue paused) to the audit list KEYS[10].
local function record(event, id)
  count(event_counter(event.kind), 1)
  if event.actor and string.sub(event.actor, 1, 9) == 'operator:' then
    event.job = id
    if redis.call('LPUSH', KEYS[10], encode_event(event)) > AUDIT_KEPT then
      redis.call('LTRIM', KEYS[10], 0, AUDIT_KEPT - 1)
    end
  end
end

-- Append an event of job `id` to its list KEYS[list] (kept to EVENTS_KEPT),
-- count its kind, and copy an operator's event to the audit list.
local function append_event(list, id, kind, from, to, actor, token, message)
  local event = new_event(kind, from, to, actor, token, message)
  if redis.call('RPUSH', KEYS[list], encode_event(event)) > EVENTS_KEPT then
    redis.call('LTRIM', KEYS[list], -EVENTS_KEPT, -1)
  end
  record(event, id)
end

-- An event with no job list to go to (the job is deleted, or there is no
-- job: a queue paused): counted, and kept in the audit list for an operator.
local function audit_event(id, kind, from, to, actor, token, message)
  record(new_event(kind, from, to, actor, token, message), id)
end

-- Remove job `id` (`status`, `queue`): its hash KEYS[hash], its event list
-- KEYS[list] and attempts list KEYS[attempts], its entries in the updated,
-- updated:<status>, listing block and leases zsets, its idempotency key `idem` and unique key `unique` when they still name it
-- (KEYS[11..13], see the header), and its status count. The caller takes its
-- rank out of the ready/scheduled zsets (`unqueue`); audit entries stay.
local function remove_job(hash, list, attempts, id, status, queue, idem, unique)
  local f = redis.call('HMGET', KEYS[hash], 'name', 'last_updated_at')
  list_job('ZREM', status, queue, f[1], f[2], id)
  redis.call('DEL', KEYS[hash], KEYS[list], KEYS[attempts])
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZREM', KEYS[2 + status / 100], id)
  redis.call('ZREM', KEYS[9], id)
  count(status_counter(status, queue), -1)
  if idem and redis.call('HGET', KEYS[11], idem) == id then
    redis.call('HDEL', KEYS[11], idem)
  end
  if unique and redis.call('HGET', KEYS[12], unique) == id then
    redis.call('HDEL', KEYS[12], unique)
    redis.call('HDEL', KEYS[13], unique)
  end
end

-- The per-call state of this section: ARGV[2..3], no counts, no history or
-- listing block yet.
local function start_job()
  EVENTS_KEPT, AUDIT_KEPT = tonumber(ARGV[2]), tonumber(ARGV[3])
  deltas, history_deltas, now_us = {}, {}, nil
  history = {first = nil, widths = {}, kinds = {}}
  listing = {first = nil, low = 100, high = 600}
end
