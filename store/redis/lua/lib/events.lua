-- lib/events.lua: a job's events (events:<id>, kept to ARGV[2] of lib/job.lua), the audit log's entries, the outcome of a run (happen, settle), a job's removal (job:<id>, events:<id>, attempts:<id>, idempotency, unique, unique_until) and start_job, the per-call state of lib/job.lua and the sections after it; a section of the library's top level after
-- lib/job.lua, whose per-call state (start_job, lib/events.lua) covers it
-- (store/redis/scripts.py SECTIONS).
--
-- KEYS: none of its own (KEYS[1] is the prefix, lib/keys.lua).
-- ARGV: none of its own (lib/job.lua reads ARGV[1..3]).
-- Returns: nothing. Defines new_event, encode_event, record, append_event, audit_event, RUN_CLAIMED, RUN_COMPLETED, happen, settle, remove_job, start_job.

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
    deltas, history_deltas, handler_deltas = {}, {}, {}
  end
  flushed, named_queues = false, nil
end
