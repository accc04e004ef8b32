-- lib/listing.lua: what a status change writes besides events: the listing zsets updated:<status>:queue:<queue> and updated:<status>:name:<name>, queue_names, leases, the job hash, and the ready and scheduled zsets a job leaves; a section of the library's top level after
-- lib/job.lua, whose per-call state (start_job, lib/events.lua) covers it
-- (store/redis/scripts.py SECTIONS).
--
-- KEYS: none of its own (KEYS[1] is the prefix, lib/keys.lua).
-- ARGV: none of its own (lib/job.lua reads ARGV[1..3]).
-- Returns: nothing. Defines LEASED, list_job, move, change, operator_guard, unqueue.

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
-- scheduled zsets of `queue` (and its key's ready set: lib/ready.lua).
local function unqueue(member, queue)
  if member and not ready_remove(queue, member) then
    redis.call('ZREM', P .. 'scheduled:' .. queue, member)
  end
end
