-- claim: lease due jobs in one call (lib/claim.lua `claim_jobs`): promote
-- due scheduled jobs to ready, skip paused queues, take the heads of the
-- ready zsets in claim order, lease each.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: paused,
--              ready:<queue>, scheduled:<queue>, job:<id>, leases, counters,
--              updated zsets, listing zsets
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      operation name, 'claim': its row of the lifecycle table compiled into
--              the library (lib/job.lua `operation`)
-- ARGV[5]      worker id
-- ARGV[6]      lease TTL, seconds (for jobs without their own lease_ttl_seconds)
-- ARGV[7]      most jobs to claim
-- ARGV[8]      most due scheduled jobs moved to ready per queue (bounds the call)
-- ARGV[9]      a ready member to claim alone (a wake-up notice names it; the
--              queue is ARGV[10]), or '' to claim by claim order
-- ARGV[10..]   queue names
-- A queue with limits is claimed after the others (lib/claim.lua).
-- Returns:     {job_1, job_2, ...}: each leased job as lib/claim.lua returns it
--              (the JSON text of {hash before the claim, lease_token,
--              lease_expires_at, now}: codec.claim_entry);
--              then {'retry_after', seconds} when a rate limit held jobs
--              (store/redis/flow.py reads it: claim_retry_after)
--
-- @include lib/clock.lua
-- @include lib/job.lua

local queues = {}
for i = 10, #ARGV do
  queues[#queues + 1] = ARGV[i]
end
local op = operation(ARGV[4])
local out, retry = claim_jobs(op, ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), none(ARGV[9]), queues)
flush_counts()
if retry then
  out[#out + 1] = {'retry_after', fmt(retry)}
end
return out
