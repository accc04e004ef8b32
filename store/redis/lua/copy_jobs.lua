-- copy_jobs: bulk fixtures (store/redis/fixtures.py, for the benchmarks at
-- scale): copies of one template job of the store, each with its own id,
-- time, name, payload, error and due time, written and indexed as the
-- store's own functions would have left them (lib/job.lua `list_job`, the
-- ready and scheduled zsets by `rank`, the counters and the narrowest
-- history width), without running the lifecycle.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: job:<id> and
--              events:<id> of the template and the copies, ready:<queue> or
--              scheduled:<queue>, the listing zsets, queue_names, counters,
--              history:<narrowest width>, history_index:<narrowest width>
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      the template's id (its hash and event list are read)
-- ARGV[5]      the copies' queue
-- ARGV[6]      the events one copy stands for, "<kind> <n> <kind> <n> ..."
--              (the template's, happy path's included: JobStore.events)
-- ARGV[7 + 6(i - 1)] .. ARGV[12 + 6(i - 1)]: copy i's id; time (epoch
--              seconds as the store writes them: its created, started,
--              heartbeat, completed and last-updated times, its events' "at",
--              its listing score); name, payload (JSON text), error (JSON
--              text) and due time ('' = the template's name, payload and
--              error, and the copy's time as its due time)
-- A copy's event kinds of HISTORY_KINDS count in its queue's q:<kind> totals
-- and in the narrowest history bucket of its time (wider widths are rolled
-- up by trim_history), the others in e:<kind>.
-- Returns:     the number of copies written
--
-- @include lib/clock.lua
-- @include lib/job.lua

local TIMES = {
  created_at = true, started_at = true, last_heartbeat_at = true, completed_at = true, last_updated_at = true,
}
local template, queue = ARGV[4], ARGV[5]
local fields = redis.call('HGETALL', P .. 'job:' .. template)
local events = redis.call('LRANGE', P .. 'events:' .. template, 0, -1)
local own = {}
for j = 1, #fields, 2 do
  own[fields[j]] = fields[j + 1]
end
local status, priority = tonumber(own.status), own.priority or '0'
local kinds = words(ARGV[6])
local width = HISTORY_WIDTHS[1]
local history = {}  -- "<bucket>|<queue>|<kind>" -> events, written once at the end
local n = (#ARGV - 6) / 6
for i = 1, n do
  local a = 7 + 6 * (i - 1)
  local id, t = ARGV[a], ARGV[a + 1]
  local name, payload, err, due = none(ARGV[a + 2]), none(ARGV[a + 3]), none(ARGV[a + 4]), none(ARGV[a + 5])
  name, due = name or own.name, due or t
  local member = rank(priority, tonumber(due), id)
  local copy = {}
  for j = 1, #fields, 2 do
    local field, value = fields[j], fields[j + 1]
    if field == 'id' then
      value = id
    elseif field == 'queue' then
      value = queue
    elseif field == 'name' then
      value = name
    elseif field == 'payload' then
      value = payload or value
    elseif field == 'error' then
      value = err or value
    elseif field == 'due_at' or field == 'retry_delay_until' then
      value = due
    elseif field == 'rank' then
      value = member
    elseif TIMES[field] then
      value = t
    end
    copy[#copy + 1], copy[#copy + 2] = field, value
  end
  if payload and not own.payload then  -- the template has none: its hash leaves the field out
    copy[#copy + 1], copy[#copy + 2] = 'payload', payload
  end
  if err and not own.error then
    copy[#copy + 1], copy[#copy + 2] = 'error', err
  end
  redis.call('HSET', P .. 'job:' .. id, unpack(copy))
  if #events > 0 then
    local timeline = {}
    for j, event in ipairs(events) do
      timeline[j] = (string.gsub(event, '"at":"[^"]*"', '"at":"' .. t .. '"'))
    end
    redis.call('RPUSH', P .. 'events:' .. id, unpack(timeline))
  end
  if status == FLOW.status.Queued then
    redis.call('ZADD', P .. 'ready:' .. queue, '0', member)
  elseif status == FLOW.status.Scheduled then
    redis.call('ZADD', P .. 'scheduled:' .. queue, due, member)
  end
  list_job('ZADD', status, queue, name, t, id)
  local bucket = fmt(math.floor(tonumber(t) / width) * width)
  for k = 1, #kinds, 2 do
    local kind, times = kinds[k], tonumber(kinds[k + 1])
    if HISTORY_KINDS[kind] then
      count(queue_event_counter(kind, queue), times)
      local field = bucket .. '|' .. queue .. '|' .. kind
      history[field] = (history[field] or 0) + times
    else
      count(event_counter(kind), times)
    end
  end
end
for field, times in pairs(history) do
  if redis.call('HINCRBY', P .. 'history:' .. width, field, times) == times then
    local bucket_start = string.sub(field, 1, string.find(field, '|', 1, true) - 1)
    redis.call('ZADD', P .. 'history_index:' .. width, bucket_start, field)
  end
end
flush_counts()
return n
