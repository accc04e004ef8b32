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
-- Returns: nothing. Defines status_set, none, words, operation, rank; the
-- rest of the job helpers are the sections pasted after it, by concept:
-- lib/counts.lua (counters and history of a call), lib/listing.lua (the
-- indexes and the hash change of a status change) and lib/events.lua (a
-- job's events, its removal, and start_job, this section's per-call state).
-- A function that counts calls flush_counts() once, before it returns.

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
