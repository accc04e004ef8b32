-- job_fields: some fields of many job hashes in one call (read only), for a
-- search that tests them before reading the jobs that pass whole
-- (store/redis/search.py `_probe`): one command for a chunk instead of one
-- HMGET a job, whose client-side cost (~15 us each in redis-py) was most of a
-- payload search's time.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: job:<id>
-- ARGV[1]      n, how many field names follow
-- ARGV[2..n+1] the field names
-- ARGV[n+2..]  job ids
-- Returns:     for each id in order, its n values in order, flat (nil for a
--              field or job that does not exist)

local n = tonumber(ARGV[1])
local fields = {}
for i = 1, n do
  fields[i] = ARGV[1 + i]
end
local out, k = {}, 0
for j = n + 2, #ARGV do
  local values = redis.call('HMGET', P .. 'job:' .. ARGV[j], unpack(fields))
  for i = 1, n do
    out[k + i] = values[i]
  end
  k = k + n
end
return out
