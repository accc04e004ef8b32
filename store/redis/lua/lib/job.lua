-- lib/job.lua: helpers of the scripts that change jobs; include after
-- lib/clock.lua. Every including script passes the common KEYS block first
-- (store/redis/keys.py, Keys.common):
--
-- KEYS[1]      counters hash: "s:<status>:<queue>" job counts, "e:<kind>" event totals
-- KEYS[2]      updated zset: every job, score last_updated_at, member id
-- KEYS[3..8]   updated:<status> zsets for statuses 100..600: KEYS[2 + status / 100]
-- KEYS[9]      leases zset: InProgress jobs, score lease_expires_at, member id
-- ARGV[2]:     events kept per job (each job's event list is trimmed to this many)
-- Returns: nothing. Defines status_set, rank, move, append_event, none.

local EVENTS_KEPT = tonumber(ARGV[2])

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

-- Index and count job `id` of `queue` under status `new` (`old` nil for a new job).
local function move(id, queue, old, new)
  if old then
    redis.call('ZREM', KEYS[2 + old / 100], id)
    redis.call('HINCRBY', KEYS[1], 's:' .. old .. ':' .. queue, -1)
  end
  redis.call('ZADD', KEYS[2 + new / 100], now, id)
  redis.call('ZADD', KEYS[2], now, id)
  redis.call('HINCRBY', KEYS[1], 's:' .. new .. ':' .. queue, 1)
end

-- Append an event to the list KEYS[list] (kept to EVENTS_KEPT) and count its kind.
local function append_event(list, kind, from, to, actor, token, message)
  local event = {
    at = fmt(now), kind = kind, from = from, to = to,
    actor = actor, token = token, message = message,
  }
  redis.call('RPUSH', KEYS[list], cjson.encode(event))
  redis.call('LTRIM', KEYS[list], -EVENTS_KEPT, -1)
  redis.call('HINCRBY', KEYS[1], 'e:' .. kind, 1)
end
