-- audit_migrate: move the oldest entries of the audit list of earlier
-- releases (newest first) into the audit log zset, each scored by its time;
-- run until nothing is left (store/redis/audit.py). Entries already moved are
-- moved again harmlessly (ZADD of the same member), so racing callers agree.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: audit (the
--              earlier list: events as JSON with "at", newest first) and
--              audit_log (the zset, score the event's time, epoch seconds)
-- ARGV[1]      most entries moved by this call
-- Returns:     entries left in the list

local legacy, log = P .. 'audit', P .. 'audit_log'
local moved = redis.call('LRANGE', legacy, -tonumber(ARGV[1]), -1)
for _, text in ipairs(moved) do
  redis.call('ZADD', log, tonumber(cjson.decode(text).at), text)
end
if #moved > 0 then
  redis.call('LTRIM', legacy, 0, -#moved - 1)
end
return redis.call('LLEN', legacy)
