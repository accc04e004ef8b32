-- load_finished: copy one finished job (hash and event list) to many new ids,
-- as if each had been enqueued, claimed and completed. A bench loader
-- (bench/scale.py), not a store script: it writes the keys the store's own
-- scripts write for a Completed job, without running the lifecycle.
--
-- KEYS[1]      updated zset (every job, score last_updated_at)
-- KEYS[2]      updated:<status> zset of the template's status
-- KEYS[3]      the template job's hash
-- KEYS[4]      the template job's event list
-- for copy i = 1..n, KEYS[3 + 2i], KEYS[4 + 2i]: its job hash, its event list
-- ARGV[2i - 1] copy i's id
-- ARGV[2i]     copy i's time (epoch seconds as the store writes them): every
--              time field of the hash, every event's "at" and both scores
-- Returns:     n
-- Counters are left to the caller (one HINCRBY per counter for the whole load).

local TIMES = {
  created_at = true, due_at = true, started_at = true,
  last_heartbeat_at = true, completed_at = true, last_updated_at = true,
}
local fields = redis.call('HGETALL', KEYS[3])
local events = redis.call('LRANGE', KEYS[4], 0, -1)
local n = (#KEYS - 4) / 2
for i = 1, n do
  local id, t = ARGV[2 * i - 1], ARGV[2 * i]
  local copy = {}
  for j = 1, #fields, 2 do
    local name, value = fields[j], fields[j + 1]
    if name == 'id' then
      value = id
    elseif TIMES[name] then
      value = t
    end
    copy[j], copy[j + 1] = name, value
  end
  redis.call('HSET', KEYS[3 + 2 * i], unpack(copy))
  local timeline = {}
  for j, event in ipairs(events) do
    timeline[j] = (string.gsub(event, '"at":"[^"]*"', '"at":"' .. t .. '"'))
  end
  redis.call('RPUSH', KEYS[4 + 2 * i], unpack(timeline))
  redis.call('ZADD', KEYS[1], t, id)
  redis.call('ZADD', KEYS[2], t, id)
end
return n
