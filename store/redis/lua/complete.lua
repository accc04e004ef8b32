-- complete: ack one or many jobs, each guarded on its own by status and token
-- (lib/ack.lua `complete_job`).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: job:<id>,
--              events:<id>, leases, counters, history, updated and listing zsets
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      operation name, 'complete': its row of the lifecycle table compiled into
--              the library (lib/job.lua `operation`)
-- ARGV[5]      actor (worker id, '' for none)
-- ARGV[6]      1: return each completed job; 0: do not (a worker's acks)
-- then 4 values per ack, ARGV[7 + 4(i-1)] ...: job id, lease token held,
--              result JSON (written to the `result` field), the run's last
--              progress report JSON ('' for none: store/redis/codec.py)
-- A job with children (`has_children`) releases or cancels those waiting
-- for it, one of a limited queue leaves its running count (lib/ack.lua).
-- Returns:     one entry per ack: {1, job as a flat HGETALL array} completed
--              ({1} when ARGV[6] is 0), {0, current token, status} refused
--              (nothing written), {-1} no such job
--
-- @include lib/clock.lua
-- @include lib/job.lua

local op = operation(ARGV[4])
local actor, want_jobs = none(ARGV[5]), ARGV[6] == '1'
local out = {}
for i = 1, (#ARGV - 6) / 4 do
  local a = 7 + 4 * (i - 1)
  out[i] = complete_job(op, actor, ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2], none(ARGV[a + 3]), want_jobs)
end
flush_counts()
flush_handler_minutes()
return out
