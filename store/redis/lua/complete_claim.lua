-- complete_claim: ack a worker's jobs and lease it the next ones in the same
-- call (BullMQ's moveToFinished with fetch-next): every ack as lua/complete.lua
-- (lib/ack.lua `complete_job`), then a claim as lua/claim.lua (lib/claim.lua
-- `claim_jobs`): the queues of the first group, and only when they gave none,
-- those of the second (the worker's weighted turn, then the others:
-- workers/worker.py `_claim`).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: those of lua/complete.lua
--              and lua/claim.lua
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      operation name, 'complete' (lib/job.lua `operation`)
-- ARGV[5]      operation name, 'claim'
-- ARGV[6]      worker id (the acks' actor and the claim's holder)
-- ARGV[7]      lease TTL, seconds (for jobs without their own lease_ttl_seconds)
-- ARGV[8]      most jobs to claim (0: none)
-- ARGV[9]      most due scheduled jobs moved to ready per queue
-- ARGV[10]     n, the number of acks
-- ARGV[11 + 4(i-1)] ...: ack i's job id, lease token, result JSON, progress JSON
--              ('' for none), as lua/complete.lua
-- ARGV[11 + 4n] k, the number of queues of the first group; then the queue names
--              (the first k are the first group, the rest the second)
-- Returns:     {acks, jobs}: one entry per ack as lua/complete.lua's with ARGV[6]
--              0; each leased job as lua/claim.lua's
--
-- @include lib/clock.lua
-- @include lib/job.lua

local complete, claim = operation(ARGV[4]), operation(ARGV[5])
local worker, ttl, want, promote = ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local n = tonumber(ARGV[10])
local acks = {}
for i = 1, n do
  local a = 11 + 4 * (i - 1)
  acks[i] = complete_job(complete, worker, ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2], none(ARGV[a + 3]), false)
end
local jobs = {}
if want > 0 then
  local at = 11 + 4 * n
  local first, second = {}, {}
  for i = at + 1, #ARGV do
    local group = i <= at + tonumber(ARGV[at]) and first or second
    group[#group + 1] = ARGV[i]
  end
  jobs = claim_jobs(claim, worker, ttl, want, promote, nil, first)
  if #jobs == 0 and #second > 0 then
    jobs = claim_jobs(claim, worker, ttl, want, promote, nil, second)
  end
end
flush_counts()
flush_handler_minutes()
return {acks, jobs}
