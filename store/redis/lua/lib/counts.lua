-- lib/counts.lua: the counter and history deltas of one call, written once by flush_counts (keys written: counters, history:<narrowest width>, history_index:<narrowest width>); a section of the library's top level after
-- lib/job.lua, whose per-call state (start_job, lib/events.lua) covers it
-- (store/redis/scripts.py SECTIONS).
--
-- KEYS: none of its own (KEYS[1] is the prefix, lib/keys.lua).
-- ARGV: none of its own (lib/job.lua reads ARGV[1..3]).
-- Returns: nothing. Defines event_counter, queue_event_counter, count, count_history, count_text, flush_counts.

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
