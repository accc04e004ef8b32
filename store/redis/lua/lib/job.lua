-- lib/job.lua: helpers of the scripts that change jobs; include after
-- lib/clock.lua. Every including script passes this common block first
-- (store/redis/keys.py, Keys.common; store/redis/plumbing.py, _args):
--
-- KEYS[1]      counters hash: "s:<status>:<queue>" job counts, "e:<kind>" event totals
-- KEYS[2]      updated zset: every job, score last_updated_at, member id
-- KEYS[3..8]   updated:<status> zsets for statuses 100..600: KEYS[2 + status / 100]
-- KEYS[9]      leases zset: InProgress jobs, score lease_expires_at, member id
-- KEYS[10]     audit list: events whose actor starts with "operator:", newest first
-- ARGV[1]      clock offset, seconds (lib/clock.lua)
-- ARGV[2]      events kept per job (each job's event list is trimmed to this many)
-- ARGV[3]      entries kept in the audit list
-- Returns: nothing. Defines status_set, none, rank, count, flush_counts, move,
-- append_event. A script that counts calls flush_counts() once, before it returns.

local EVENTS_KEPT, AUDIT_KEPT = tonumber(ARGV[2]), tonumber(ARGV[3])

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

-- Member of a ready/scheduled zset: priority descending (1000000 is
-- store.models.MAX_PRIORITY), due time ascending in microseconds, then id.
-- Ready zsets keep every score 0, so byte order of the member is claim order.
local function rank(priority, due, id)
  return string.format('%07d%017d:%s', 1000000 - tonumber(priority), math.floor(due * 1000000 + 0.5), id)
end

-- Counter deltas of this call, written once by flush_counts (one HINCRBY per
-- counter instead of one per job and event).
local deltas = {}
local function count(field, n)
  deltas[field] = (deltas[field] or 0) + n
end
local function flush_counts()
  for field, n in pairs(deltas) do
    if n ~= 0 then
      redis.call('HINCRBY', KEYS[1], field, n)
    end
  end
  deltas = {}
end

-- Index and count job `id` of `queue` under status `new` (`old` nil for a new job).
local function move(id, queue, old, new)
  if old then
    redis.call('ZREM', KEYS[2 + old / 100], id)
    count('s:' .. old .. ':' .. queue, -1)
  end
  redis.call('ZADD', KEYS[2 + new / 100], now, id)
  redis.call('ZADD', KEYS[2], now, id)
  count('s:' .. new .. ':' .. queue, 1)
end

-- Append an event of job `id` to its list KEYS[list] (kept to EVENTS_KEPT),
-- count its kind, and copy an operator's event to the audit list.
local function append_event(list, id, kind, from, to, actor, token, message)
  local event = {
    at = fmt(now), kind = kind, from = from, to = to,
    actor = actor, token = token, message = message,
  }
  if redis.call('RPUSH', KEYS[list], cjson.encode(event)) > EVENTS_KEPT then
    redis.call('LTRIM', KEYS[list], -EVENTS_KEPT, -1)
  end
  count('e:' .. kind, 1)
  if actor and string.sub(actor, 1, 9) == 'operator:' then
    event.job = id
    if redis.call('LPUSH', KEYS[10], cjson.encode(event)) > AUDIT_KEPT then
      redis.call('LTRIM', KEYS[10], 0, AUDIT_KEPT - 1)
    end
  end
end
