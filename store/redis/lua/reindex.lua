-- reindex: put existing jobs into the listing zsets (a one-off after upgrading
-- from a version without them; store/redis/reindex.py). Each job is read and
-- indexed in this script, so it is safe beside running workers: a later
-- status change removes exactly the member written here.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: job:<id>, listing zsets
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[3 + i]  job i's id
-- Jobs deleted meanwhile are skipped; ZADD of a member already there is a no-op.
-- Returns:     number of jobs indexed
--
-- @include lib/clock.lua
-- @include lib/job.lua

local indexed = 0
for i = 1, #ARGV - 3 do
  local f = redis.call('HMGET', P .. 'job:' .. ARGV[3 + i], 'status', 'queue', 'name', 'last_updated_at')
  if f[1] and f[2] and f[3] and f[4] then
    list_job('ZADD', tonumber(f[1]), f[2], f[3], f[4], ARGV[3 + i])
    indexed = indexed + 1
  end
end
return indexed
