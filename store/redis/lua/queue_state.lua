-- queue_state: pause or resume a queue (idempotent). The claim scripts read
-- the paused set; the state (who, when) is kept for the console. The change
-- is counted and, for an operator actor, kept in the audit list (no job id).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: queues (hash: queue name ->
--              state JSON {paused, changed_by, changed_at}), paused (set of the
--              paused queues' names), counters, audit
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      queue name
-- ARGV[5]      1 pause, 0 resume
-- ARGV[6]      actor
-- ARGV[7]      event kind (EventKind.QUEUE_PAUSED or QUEUE_RESUMED)
-- ARGV[8]      event message
-- Returns:     the queue's state JSON (changed_at: epoch seconds as text)
--
-- @include lib/clock.lua
-- @include lib/job.lua

local queue, paused, actor = ARGV[4], ARGV[5] == '1', ARGV[6]
if paused then
  redis.call('SADD', P .. 'paused', queue)
else
  redis.call('SREM', P .. 'paused', queue)
end
local state = cjson.encode({paused = paused, changed_by = actor, changed_at = fmt(now)})
redis.call('HSET', P .. 'queues', queue, state)
audit_event('', ARGV[7], nil, nil, actor, nil, ARGV[8])
flush_counts()
return state
