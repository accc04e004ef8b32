-- purge: delete finished jobs, their events and attempts (purge step 2), each
-- only if it still has one of the given statuses and was last updated before
-- now - age.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: job:<id>, events:<id>,
--              attempts:<id>, idempotency, unique, unique_until, counters, updated
--              and listing zsets
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      age, seconds
-- ARGV[5]      statuses purged, finished ones only (e.g. "400 500 600")
-- ARGV[5 + i]  job i's id
-- A job others wait for is kept while one of them still waits (lib/flow.lua
-- `flow.keeps`); a removed job's dependency edges go with it.
-- Status counts go down; event totals and the audit list stay (they are history).
-- Returns:     number of jobs deleted
--
-- @include lib/clock.lua
-- @include lib/job.lua

local before, finished = now - tonumber(ARGV[4]), status_set(ARGV[5])
local deleted = 0
for i = 1, #ARGV - 5 do
  local id = ARGV[5 + i]
  local f = redis.call('HMGET', P .. 'job:' .. id, 'status', 'queue', 'last_updated_at', 'idempotency_key', 'unique_key',
    'has_children', 'created_at')
  local status = tonumber(f[1])
  -- last_updated_at absent: not changed since its enqueue (store/redis/layout.py 6)
  if status and finished[status] and tonumber(f[3] or f[7]) < before and not (f[6] and flow.keeps(id)) then
    redis.call('DEL', P .. 'children:' .. id, P .. 'waiting:' .. id, P .. 'parents:' .. id,
      P .. 'remote_pending:' .. id)
    remove_job(id, status, f[2], f[4], f[5])
    deleted = deleted + 1
  end
end
flush_counts()
return deleted
