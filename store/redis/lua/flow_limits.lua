-- flow_limits: set or clear a queue's limits (docs/architecture.md, Flow
-- control), audited; the queue's running jobs are counted again under the
-- new limits (lib/flow.lua `flow.recount`), so a limit set while jobs run
-- counts them. Workers see the change at their next claim.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: limits, running,
--              running_keys:<queue>, leases, job:<id> of jobs in flight,
--              counters, audit_log
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      queue name
-- ARGV[5]      the limits as JSON (QueueLimits.to_json without nulls), '' to clear
-- ARGV[6]      event kind (EventKind.QUEUE_LIMITS_SET)
-- ARGV[7]      actor
-- ARGV[8]      event message
-- Returns:     number of the queue's jobs running now
--
-- @include lib/clock.lua
-- @include lib/job.lua

local queue, text = ARGV[4], none(ARGV[5])
local limits = nil
if text then
  redis.call('HSET', P .. 'limits', queue, text)
  limits = cjson.decode(text)
else
  redis.call('HDEL', P .. 'limits', queue)
end
local running = flow.recount(queue, limits)
audit_event('', ARGV[6], nil, nil, none(ARGV[7]), nil, ARGV[8])
flush_counts()
return running
