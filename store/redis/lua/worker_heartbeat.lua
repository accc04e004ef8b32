-- worker_heartbeat: register or refresh a worker process.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: worker:<id> (hash), workers
--              (zset: worker ids by last_seen_at)
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      worker id
-- ARGV[3]      host
-- ARGV[4]      pid
-- ARGV[5]      queues, JSON list
-- ARGV[6]      concurrency
-- ARGV[7]      jobs in hand, JSON list
-- ARGV[8]      started_at, epoch seconds
-- Every field is refreshed (a worker restarted under the same id has a new
-- pid and start time); last_seen_at = now. An operator's `command` and
-- `command_by` (command_worker.lua) are kept: the worker acts on the command
-- at every beat and the workers page shows it.
-- Returns:     the worker's pending command ('quiet', 'stop'), or nil
--
-- @include lib/clock.lua

local worker = P .. 'worker:' .. ARGV[2]
redis.call('HSET', worker, 'id', ARGV[2], 'host', ARGV[3], 'pid', ARGV[4], 'started_at', ARGV[8],
  'queues', ARGV[5], 'concurrency', ARGV[6], 'jobs_in_hand', ARGV[7], 'last_seen_at', now)
redis.call('ZADD', P .. 'workers', now, ARGV[2])
return redis.call('HGET', worker, 'command')
