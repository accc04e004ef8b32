-- lib/job.lua: helpers of the functions that change jobs, a section of the
-- library's top level after lib/keys.lua and lib/clock.lua
-- (store/redis/scripts.py); a function whose file has
-- `-- @include lib/job.lua` runs start_job() before its body. Every key is
-- built from the prefix P (lib/keys.lua), by the helpers from the job id,
-- queue, status or width they are given.
--
-- KEYS: none of its own (KEYS[1] is the prefix, lib/keys.lua).
-- ARGV[1]      clock offset, seconds (lib/clock.lua)
-- ARGV[2]      events kept per job (each job's event list is trimmed to this many)
-- ARGV[3]      unused (the audit log is trimmed by age, store/redis/audit.py)
-- A function of an operation passes the operation's name (an Operation value,
-- store/redis/plumbing.py op_args); `operation(name)` returns its row of the
-- lifecycle table compiled into the library (OPERATIONS: sources, target,
-- event, stamps, clears). HISTORY_WIDTHS, HISTORY_NARROW and HISTORY_KINDS (store/counters.py)
-- are compiled in too.
-- Keys written (keys.py): counters, the listing zsets
-- updated:<status>:queue:<queue> and updated:<status>:name:<name>,
-- queue_names, leases, audit_log, history:60, history_index:60, and per job
-- job:<id>, events:<id>, attempts:<id>, ready:<queue>, scheduled:<queue>;
-- idempotency, unique, unique_until when a job is removed.
-- Listing zsets: score last_updated_at in whole microseconds, member the job
-- id, so ZRANGE ... REV is (last_updated_at, id) descending, the order of
-- listings (store/redis/listing.py).
-- Counts written (docs/architecture.md, Redis key schema): no status
-- counts (a status's listing zsets and the leases zset are counted:
-- lua/counts.lua), no event total of a HISTORY_KINDS kind (the sum of its
-- q:<kind>:<queue> totals is), history in the narrowest width only (the
-- wider ones are rolled up from it: lua/trim_history.lua, lua/history.lua).
-- Returns: nothing. Defines start_job, status_set, none, words, operation,
-- rank, event_counter, queue_event_counter, count,
-- count_history, flush_counts, list_job, move, change, operator_guard,
-- unqueue, append_event, audit_event, LEASED, RUN_CLAIMED, RUN_COMPLETED, happen,
-- settle, remove_job. A function that counts
-- calls flush_counts() once, before it returns.

-- Events kept per job (ARGV[2]), read when a function appends one.
local function events_kept()
  return tonumber(ARGV[2])
end

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
  local head, us
  if not priority or priority == '0' or priority == '' or priority == 0 then
    head = '1000000'  -- the default (absent: nil, false from HMGET, '' in ARGV); string.format costs a sprintf
  else
    head = string.format('%07d', 1000000 - tonumber(priority))
  end
  if due == now then
    us = now_us
    if #us < 17 then
      us = string.rep('0', 17 - #us) .. us
    end
  else
    us = string.format('%017d', math.floor(due * 1000000 + 0.5))
  end
  return head .. us .. ':' .. id
end

-- Counter keys of the counters hash; store/counters.py (event_key,
-- queue_event_key) writes the same text in Python.
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

-- History: events of a kind of HISTORY_KINDS per queue in this call, written
-- once by flush_counts into the current bucket of the narrowest width,
-- HISTORY_WIDTHS[1] (one HINCRBY per queue and kind, not per job, and a ZADD
-- when that made a new field); the wider widths are its roll-ups. Its
-- q:<kind>:<queue> total is counted too, and is the kind's only total.
local history_deltas = {}
local function count_history(queue, kind)
  if HISTORY_KINDS[kind] then
    local field = queue .. '|' .. kind
    history_deltas[field] = (history_deltas[field] or 0) + 1
    count(queue_event_counter(kind, queue), 1)
  end
end

-- An integer as the text redis.call is given (a number would be formatted
-- with %.17g at the call); 0 and 1, the usual ones, need no formatting.
local function count_text(n)
  if n == 1 then
    return '1'
  elseif n == 0 then
    return '0'
  end
  return string.format('%d', n)
end

-- The current bucket of the narrowest width and its text, kept between
-- calls (the library's state lives as long as the server's Lua state):
-- string.format runs once a bucket, not once a call.
local bucket_start, bucket_text
-- Whether the last call's deltas were written (and so emptied).
local flushed = false

-- Write this call's counter and history deltas (each once), emptying their
-- tables (reused by the next call: two tables fewer to make and collect a
-- call); start_job() makes new ones after a call that failed half-way, so
-- it leaves nothing to the next.
local function flush_counts()
  for field, n in pairs(deltas) do
    if n ~= 0 then
      redis.call('HINCRBY', P .. 'counters', field, count_text(n))
    end
    deltas[field] = nil
  end
  local history
  for field, n in pairs(history_deltas) do
    if not history then
      local width = HISTORY_WIDTHS[1]
      local start = now - now % width
      if start ~= bucket_start then
        bucket_start, bucket_text = start, string.format('%d', start)
      end
      history = P .. 'history:' .. HISTORY_NARROW
    end
    local member = bucket_text .. '|' .. field
    -- The zset (for trimming) learns a field once: when this call made it.
    if redis.call('HINCRBY', history, member, count_text(n)) == n then
      redis.call('ZADD', P .. 'history_index:' .. HISTORY_NARROW, bucket_text, member)
    end
    history_deltas[field] = nil
  end
  flushed = true
end

-- InProgress jobs are indexed by the leases zset alone (score
-- lease_expires_at, member id): no updated:300 and no listing zsets, which
-- stay small (jobs in flight) and so cost the most to write; listings of
-- InProgress read the leases zset (store/redis/listing.py).
local LEASED = OPERATIONS['claim'].target

-- Add (ZADD) or remove (ZREM) job `id` of status `status`, last updated
-- `at` (seconds, as text), in the listing zsets of that status (none for
-- LEASED): updated:<status>:queue:<queue> and
-- updated:<status>:name:<name>, both scored by `at` in whole
-- microseconds (lib/clock.lua `micros`: an integer score spares a listpack's
-- ZADD and ZREM the parsing of every float score), member the id, so a ZREM
-- needs neither `at` nor anything but the id. No zset of a status alone:
-- what it would hold is the union of the status's zsets by queue, which
-- listings by status alone merge and counts sum (store/redis/listing.py,
-- lua/counts.lua, lua/purge_candidates.lua); one write fewer every status
-- change. The first ZADD of a queue in a call also adds it to the
-- queue_names set, which they walk.
local named_queues = nil  -- queues this call has added to queue_names
local function list_job(command, status, queue, name, at, id)
  if status == LEASED then
    return
  end
  local by = P .. 'updated:' .. (STATUS_TEXT[status] or status)
  if command == 'ZADD' then
    local us
    if at == now_text then
      us = now_us
    else
      us = micros(tonumber(at))
    end
    redis.call('ZADD', by .. ':queue:' .. queue, us, id)
    redis.call('ZADD', by .. ':name:' .. name, us, id)
    if not named_queues then
      named_queues = {}
    end
    if not named_queues[queue] then
      named_queues[queue] = true
      redis.call('SADD', P .. 'queue_names', queue)
    end
  else
    redis.call('ZREM', by .. ':queue:' .. queue, id)
    redis.call('ZREM', by .. ':name:' .. name, id)
  end
end

-- Index job `id` of `queue` under status `new`, last updated now:
-- out of the `old` status's zsets (`old` nil for a new job). `name` is the
-- job's name when the caller read it (a new job's name is given); else it is
-- read here. Call it before `change`. A job leaving LEASED has no listing
-- entries to remove. The caller writes the leases zset.
local function move(id, queue, old, new, name)
  if not name and ((old and old ~= LEASED) or new ~= LEASED) then
    name = redis.call('HGET', P .. 'job:' .. id, 'name')
  end
  if old then
    list_job('ZREM', old, queue, name, nil, id)
  end
  list_job('ZADD', new, queue, name, now_text, id)
end

-- The job-hash change of operation `op` on job `id`: status = `target`,
-- last_updated_at and every field of op.stamps = now (op.written: a stamp
-- another one implies is left out, store/redis/scripts.py IMPLIED_STAMPS),
-- every field of op.clears deleted (op.dropped: one read only in a status
-- the job leaves is kept, KEPT_CLEARS; when `present`, a set of the fields
-- the hash has, is given: only those it has; no HDEL when none). `set` (field,
-- value, ...) and `drop` (fields) are the function's own writes: the
-- operation's written fields and Redis bookkeeping (`rank`).
local function change(id, op, target, set, drop, present)
  local fields = {'status', STATUS_TEXT[target] or target, 'last_updated_at', now_text}
  for _, field in ipairs(op.written) do
    fields[#fields + 1] = field
    fields[#fields + 1] = now_text
  end
  for _, value in ipairs(set or {}) do
    fields[#fields + 1] = value
  end
  redis.call('HSET', P .. 'job:' .. id, unpack(fields))
  local gone = {}
  for _, field in ipairs(op.dropped) do
    if not present or present[field] then
      gone[#gone + 1] = field
    end
  end
  for _, field in ipairs(drop or {}) do
    gone[#gone + 1] = field
  end
  if #gone > 0 then
    redis.call('HDEL', P .. 'job:' .. id, unpack(gone))
  end
end

-- The guarded read of an operator action: the fields 'status', ... of job
-- `id`, or nil and the function's reply when there is no such job ({-1})
-- or its status is no longer `expected`, the one the caller read and checked
-- against op.sources ({0, status}: the caller reads again).
local function operator_guard(id, op, expected, ...)
  local f = redis.call('HMGET', P .. 'job:' .. id, 'status', ...)
  if not f[1] then
    return nil, {-1}
  end
  local old = tonumber(f[1])
  if old ~= expected or not op.sources[old] then
    return nil, {0, f[1]}
  end
  return f
end

-- Take a job's `member` (its rank; nil when it has none) out of the ready and
-- scheduled zsets of `queue`.
local function unqueue(member, queue)
  if member then
    redis.call('ZREM', P .. 'ready:' .. queue, member)
    redis.call('ZREM', P .. 'scheduled:' .. queue, member)
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

-- Count `event`'s kind (not one of HISTORY_KINDS: count_history counts
-- those) and, when its actor is an operator, copy it with job
-- id `id` ('' when no job: a queue paused) to the audit log zset, scored by
-- its time (never trimmed here: maintenance prunes it by age).
local function record(event, id)
  if not HISTORY_KINDS[event.kind] then
    count(event_counter(event.kind), 1)
  end
  if event.actor and string.sub(event.actor, 1, 9) == 'operator:' then
    event.job = id
    redis.call('ZADD', P .. 'audit_log', now_text, encode_event(event))
  end
end

-- Append an event of job `id` to its event list (kept to EVENTS_KEPT),
-- count its kind, and copy an operator's event to the audit list.
local function append_event(id, kind, from, to, actor, token, message)
  local event = new_event(kind, from, to, actor, token, message)
  local kept = events_kept()
  if redis.call('RPUSH', P .. 'events:' .. id, encode_event(event)) > kept then
    redis.call('LTRIM', P .. 'events:' .. id, -kept, -1)
  end
  record(event, id)
end

-- An event with no job list to go to (the job is deleted, or there is no
-- job: a queue paused): counted, and kept in the audit list for an operator.
local function audit_event(id, kind, from, to, actor, token, message)
  record(new_event(kind, from, to, actor, token, message), id)
end

-- The happy path's events are not appended: the job hash already says them.
-- `enqueued_as` (the status a job was enqueued in) stands for its enqueued
-- event (created_at); `run` = RUN_CLAIMED stands for the claimed event of the
-- current run (started_at, claimed_from -> InProgress, worker_id,
-- lease_token), RUN_COMPLETED for that and its completed event
-- (completed_at, InProgress -> Completed, completed_by, lease_token).
-- store/redis/store.py `events` adds them to the list it reads. `happen`
-- counts such an event (and copies an operator's to the audit list, as
-- `record` does); `settle` appends a run's events to the list and drops
-- `run` before anything else changes the job or adds an event to it, so the
-- list stays in time order.
local RUN_CLAIMED, RUN_COMPLETED = '1', '2'
local function happen(id, kind, from, to, actor, token)
  if actor and string.sub(actor, 1, 9) == 'operator:' then
    record(new_event(kind, from, to, actor, token, nil), id)
  elseif not HISTORY_KINDS[kind] then
    count(event_counter(kind), 1)
  end
end

local function settle(id)
  local job = P .. 'job:' .. id
  local f = redis.call('HMGET', job, 'run', 'claimed_from', 'started_at', 'worker_id', 'lease_token',
    'completed_at', 'completed_by')
  if not f[1] then
    return
  end
  local claim, complete = OPERATIONS['claim'], OPERATIONS['complete']
  local events, token = P .. 'events:' .. id, tonumber(f[5])
  local claimed = new_event(claim.event, tonumber(f[2]), claim.target, f[4], token, nil)
  claimed.at = f[3]
  local n = redis.call('RPUSH', events, encode_event(claimed))
  if f[1] == RUN_COMPLETED then
    -- completed_by absent: the lease holder acked (lib/ack.lua)
    local done = new_event(complete.event, claim.target, complete.target, none(f[7] or f[4] or ''), token, nil)
    done.at = f[6]
    n = redis.call('RPUSH', events, encode_event(done))
  end
  local kept = events_kept()
  if n > kept then
    redis.call('LTRIM', events, -kept, -1)
  end
  redis.call('HDEL', job, 'run')
end

-- Remove job `id` (`status`, `queue`): its hash, event list and attempts
-- list, its entries in the listing and leases zsets, its
-- idempotency key `idem` and unique key `unique` when they still name it.
-- The caller takes its rank out of the
-- ready/scheduled zsets (`unqueue`); audit entries stay.
local function remove_job(id, status, queue, idem, unique)
  list_job('ZREM', status, queue, redis.call('HGET', P .. 'job:' .. id, 'name'), nil, id)
  redis.call('DEL', P .. 'job:' .. id, P .. 'events:' .. id, P .. 'attempts:' .. id)
  redis.call('ZREM', P .. 'leases', id)
  if idem and redis.call('HGET', P .. 'idempotency', idem) == id then
    redis.call('HDEL', P .. 'idempotency', idem)
  end
  if unique and redis.call('HGET', P .. 'unique', unique) == id then
    redis.call('HDEL', P .. 'unique', unique)
    redis.call('HDEL', P .. 'unique_until', unique)
  end
end

-- The per-call state of this section: no counts yet (ARGV[2] is read by
-- events_kept() when a call appends an event: a tonumber costs a strtod);
-- no queue added to queue_names yet (its table made at the first).
local function start_job()
  if not flushed then
    deltas, history_deltas = {}, {}
  end
  flushed, named_queues = false, nil
end
