-- operation_save: insert or replace a bulk operation (store/bulk.py),
-- stamped with the store's clock; created_at is kept from the stored one.
--
-- KEYS[1]      operations hash: id -> the operation's record as JSON
-- KEYS[2]      operations zset: id, score created_at
-- KEYS[3]      unfinished zset: ids of queued and running operations, score created_at
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      operation id
-- ARGV[3]      the record as JSON (created_at, updated_at ignored)
-- ARGV[4]      1 when the operation is unfinished (queued, running), else 0
-- Returns:     the record as stored (JSON)
--
-- @include lib/clock.lua

local id = ARGV[2]
local record = cjson.decode(ARGV[3])
local stored = redis.call('HGET', KEYS[1], id)
local created = now
if stored then
  created = tonumber(cjson.decode(stored).created_at) or now
end
record.created_at = fmt(created)
record.updated_at = fmt(now)
local text = cjson.encode(record)
redis.call('HSET', KEYS[1], id, text)
redis.call('ZADD', KEYS[2], created, id)
if ARGV[4] == '1' then
  redis.call('ZADD', KEYS[3], created, id)
else
  redis.call('ZREM', KEYS[3], id)
end
return text
