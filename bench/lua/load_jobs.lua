-- load_jobs: copy one template job (hash and event list) of some status to
-- many new ids of one queue, each with its own id, time, name, payload and
-- error, as if each had gone through the store's own scripts. A bench loader
-- (bench/console_load.py), not a store script: it writes the job hash, the
-- event list, the updated zsets and the queue's ready/scheduled zset; the
-- listing zsets are left to store/redis/reindex.py and the counters and
-- history to the caller.
--
-- KEYS[1]      updated zset (every job, score last_updated_at)
-- KEYS[2]      updated:<status> zset of the template's status
-- KEYS[3]      the template job's hash
-- KEYS[4]      the template job's event list
-- KEYS[5]      the queue's ready zset (ARGV[2] = 'ready'), scheduled zset
--              ('scheduled'), or any key, untouched ('')
-- for copy i = 1..n, KEYS[4 + 2i], KEYS[5 + 2i]: its job hash, its event list
-- ARGV[1]      the copies' queue
-- ARGV[2]      'ready', 'scheduled' or '': what KEYS[5] is
-- for copy i, ARGV[3 + 6(i - 1)] .. ARGV[8 + 6(i - 1)]: id; time (epoch
--              seconds as the store writes them: every time field of the
--              hash, every event's "at" and both scores); name; payload (JSON
--              text); error (JSON text, '' = the template's); due time ('' =
--              the copy's time; also retry_delay_until when the template has one)
-- Returns:     n

local TIMES = {
  created_at = true, started_at = true, last_heartbeat_at = true,
  completed_at = true, last_updated_at = true,
}
local queue, claim_set = ARGV[1], ARGV[2]
local fields = redis.call('HGETALL', KEYS[3])
local events = redis.call('LRANGE', KEYS[4], 0, -1)
local priority = tonumber(redis.call('HGET', KEYS[3], 'priority') or '0')
local n = (#KEYS - 5) / 2
for i = 1, n do
  local a = 3 + 6 * (i - 1)
  local id, t, name, payload, err = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local due = ARGV[a + 5]
  if due == '' then
    due = t
  end
  local member = string.format('%07d%017d:%s', 1000000 - priority, math.floor(tonumber(due) * 1000000 + 0.5), id)
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
      value = payload
    elseif field == 'error' and err ~= '' then
      value = err
    elseif field == 'due_at' or field == 'retry_delay_until' then
      value = due
    elseif field == 'rank' then
      value = member
    elseif TIMES[field] then
      value = t
    end
    copy[j], copy[j + 1] = field, value
  end
  redis.call('HSET', KEYS[4 + 2 * i], unpack(copy))
  if #events > 0 then
    local timeline = {}
    for j, event in ipairs(events) do
      timeline[j] = (string.gsub(event, '"at":"[^"]*"', '"at":"' .. t .. '"'))
    end
    redis.call('RPUSH', KEYS[5 + 2 * i], unpack(timeline))
  end
  redis.call('ZADD', KEYS[1], t, id)
  redis.call('ZADD', KEYS[2], t, id)
  if claim_set == 'ready' then
    redis.call('ZADD', KEYS[5], 0, member)
  elseif claim_set == 'scheduled' then
    redis.call('ZADD', KEYS[5], due, member)
  end
end
return n
