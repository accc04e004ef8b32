-- reindex: put existing jobs into this layout's listing zsets (a one-off after
-- upgrading from a layout that indexed them otherwise; store/redis/reindex.py).
-- Each job is read and indexed in this function, so it is safe beside running
-- workers: a later status change removes exactly the entries written here.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: job:<id>, the
--              listing zsets, queue_names
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      the status whose updated:<status> zset (an earlier layout's:
--              store/redis/upgrade.py removes it) the ids were read from
-- ARGV[4 + i]  job i's id
-- Each id leaves that zset (so the walk ends); a job that still has that
-- status is indexed under it (ZADD of a member already there rescores it),
-- one deleted meanwhile or now of another status is not (a status change
-- indexed it already).
-- Returns:     number of jobs indexed
--
-- @include lib/clock.lua
-- @include lib/job.lua

local walked, indexed = tonumber(ARGV[4]), 0
for i = 1, #ARGV - 4 do
  local id = ARGV[4 + i]
  local f = redis.call('HMGET', P .. 'job:' .. id, 'status', 'queue', 'name', 'last_updated_at', 'created_at')
  local at = f[4] or f[5]  -- last_updated_at absent: created_at (store/redis/layout.py 6)
  if f[1] and f[2] and f[3] and at and tonumber(f[1]) == walked then
    list_job('ZADD', walked, f[2], f[3], at, id)
    indexed = indexed + 1
  end
  redis.call('ZREM', P .. 'updated:' .. walked, id)
end
return indexed
