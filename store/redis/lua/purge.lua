-- purge: delete finished jobs, their events and attempts (purge step 2), each
-- only if it still has one of the given statuses and was last updated before
-- now - age.
--
-- KEYS[1..10]  common block (lib/job.lua)
-- KEYS[11]     idempotency hash: a deleted job's key is freed
-- KEYS[12]     unique hash: a deleted job's unique key is freed
-- KEYS[13]     unique-until hash
-- for job i = 1..n, KEYS[13 + 3i - 2] .. KEYS[13 + 3i]: job hash, event list,
--              attempts list
-- KEYS[#KEYS - 17 .. #KEYS] listing block (lib/job.lua `listing_last`)
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      age, seconds
-- ARGV[5]      statuses purged, finished ones only (e.g. "400 500 600")
-- ARGV[5 + i]  job i's id
-- Status counts go down; event totals and the audit list stay (they are history).
-- Returns:     number of jobs deleted
--
-- @include lib/clock.lua
-- @include lib/job.lua

local before, finished = now - tonumber(ARGV[4]), status_set(ARGV[5])
local deleted = 0
local l = listing_last()
for i = 1, (#KEYS - 13 - l) / 3 do
  local k, id = 13 + 3 * (i - 1), ARGV[5 + i]
  local f = redis.call('HMGET', KEYS[k + 1], 'status', 'queue', 'last_updated_at', 'idempotency_key', 'unique_key')
  local status = tonumber(f[1])
  if status and finished[status] and tonumber(f[3]) < before then
    remove_job(k + 1, k + 2, k + 3, id, status, f[2], f[4], f[5])
    deleted = deleted + 1
  end
end
flush_counts()
return deleted
