-- operation_save: insert or replace a bulk operation (store/bulk.py),
-- stamped with the store's clock; created_at is kept from the stored one.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: operations (hash: id -> the
--              operation's record as JSON), operations:created (zset: id, score
--              created_at), operations:unfinished (zset: queued and running ids)
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      operation id
-- ARGV[3]      the record as JSON (created_at, updated_at ignored)
-- ARGV[4]      1 when the operation is unfinished (queued, running), else 0
-- Returns:     the record as stored (JSON)
--
-- @include lib/clock.lua

local id = ARGV[2]
local record = cjson.decode(ARGV[3])
local stored = redis.call('HGET', P .. 'operations', id)
local created = now
if stored then
  created = tonumber(cjson.decode(stored).created_at) or now
end
record.created_at = fmt(created)
record.updated_at = fmt(now)
local text = cjson.encode(record)
redis.call('HSET', P .. 'operations', id, text)
redis.call('ZADD', P .. 'operations:created', created, id)
if ARGV[4] == '1' then
  redis.call('ZADD', P .. 'operations:unfinished', created, id)
else
  redis.call('ZREM', P .. 'operations:unfinished', id)
end
return text
