-- fixtures: write copies of one template job, each as the store's own paths
-- would have written it at the copy's time (store/fixtures.py; a bulk loader
-- for the benches, no lifecycle operation). The hash is the template's but
-- for the copy's id, queue, name, payload, error, times and rank; the event
-- list is the template's, each event at the copy's time. Indexes are written
-- by lib/job.lua `move` (as enqueue indexes a new job) and, by status, the
-- ready or scheduled zset as enqueue writes them, the leases zset as the
-- claim does. Counted as the template's events were (lib/job.lua `happen`,
-- `count_history`, `flush_counts`), with the clock set to the copy's time so
-- that the history buckets are the copy's.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: job:<id> (the
--              template's read, the copies' written), events:<id>, ready:<queue>,
--              scheduled:<queue>, leases, and what lib/job.lua move and
--              flush_counts write
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      the template's id
-- ARGV[5]      hash fields set to a copy's time, when the template has them
--              ("created_at ..."; store/fixtures.py AT_FIELDS)
-- ARGV[6]      hash fields set to its due time (DUE_FIELDS)
-- ARGV[7]      hash fields set to its lease expiry (LEASE_FIELDS)
-- ARGV[8]      the kinds of the template's events, its derived ones included
--              (store.events), space-separated: what each copy counts
-- then 8 values per copy, ARGV[9 + 8(i-1)] ...: id, queue, name, payload (JSON
--              text, '' = the template's), error (JSON text, '' = the
--              template's), time, due time, lease expiry ('' = none): epoch s
-- Returns:     the number of copies written
--
-- @include lib/clock.lua
-- @include lib/job.lua

local tid = ARGV[4]
local template = redis.call('HGETALL', P .. 'job:' .. tid)
local events = redis.call('LRANGE', P .. 'events:' .. tid, 0, -1)
local status, priority = nil, 0
local role, has = {}, {}
for j = 1, #template, 2 do
  has[template[j]] = true
  if template[j] == 'status' then
    status = tonumber(template[j + 1])
  elseif template[j] == 'priority' then
    priority = template[j + 1]
  end
end
for k, which in ipairs({'at', 'due', 'lease'}) do
  for _, field in ipairs(words(ARGV[4 + k])) do
    role[field] = which
  end
end
local kinds = words(ARGV[8])
local PER_COPY = 8
local n = (#ARGV - 8) / PER_COPY
for i = 1, n do
  local a = 9 + PER_COPY * (i - 1)
  local id, queue, name, payload, err = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local times = {at = ARGV[a + 5], due = ARGV[a + 6], lease = ARGV[a + 7]}
  -- The copy's own time is the clock its writes are stamped and counted at:
  -- the counts of the copy before are flushed at its time first.
  flush_counts()
  now, now_text = tonumber(times.at), times.at
  now_us = micros(now)  -- the listing scores and ranks made at now (lib/clock.lua)
  start_job()
  local member = rank(priority, tonumber(times.due), id)
  local copy = {}
  for j = 1, #template, 2 do
    local field, value = template[j], template[j + 1]
    if field == 'id' then
      value = id
    elseif field == 'queue' then
      value = queue
    elseif field == 'name' then
      value = name
    elseif field == 'payload' and payload ~= '' then
      value = payload
    elseif field == 'error' and err ~= '' then
      value = err
    elseif field == 'rank' then
      value = member
    elseif role[field] then
      value = times[role[field]]
    end
    copy[j], copy[j + 1] = field, value
  end
  if payload ~= '' and not has.payload then  -- the template has none: its hash leaves the field out
    copy[#copy + 1], copy[#copy + 2] = 'payload', payload
  end
  if err ~= '' and not has.error then
    copy[#copy + 1], copy[#copy + 2] = 'error', err
  end
  redis.call('HSET', P .. 'job:' .. id, unpack(copy))
  if #events > 0 then
    local timeline = {}
    for j, event in ipairs(events) do
      timeline[j] = (string.gsub(event, '"at":"[^"]*"', '"at":"' .. times.at .. '"'))
    end
    redis.call('RPUSH', P .. 'events:' .. id, unpack(timeline))
  end
  move(id, queue, nil, status, name)
  if status == FLOW.status.Queued then
    redis.call('ZADD', P .. 'ready:' .. queue, 0, member)
  elseif status == FLOW.status.Scheduled then
    redis.call('ZADD', P .. 'scheduled:' .. queue, times.due, member)
  elseif status == LEASED then
    redis.call('ZADD', P .. 'leases', micros(tonumber(times.lease)), id)
  end
  for _, kind in ipairs(kinds) do
    happen(id, kind, nil, nil, nil, nil)
    count_history(queue, kind)
  end
end
flush_counts()
return n
