-- idle: register a worker with a free slot for the hand-over of jobs
-- enqueued on its queues (lib/hand_over.lua `hand_over`), or take the
-- registration back.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: idle:<queue>
--              (zset: member '<lease TTL s> <worker id>', score the
--              registration's expiry in whole microseconds)
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      member: '<lease TTL s> <worker id>' (store/redis/wakeups.py)
-- ARGV[3]      seconds the registration holds; 0 takes it back
-- ARGV[4..]    the worker's queue names
-- Registering also drops the registrations of those queues that expired
-- (a worker that died while idle).
-- Returns:     the number of queues it is registered on now
--
-- @include lib/clock.lua

local member, hold = ARGV[2], tonumber(ARGV[3])
local expired = '(' .. micros(now)
local until_text = micros(now + hold)
local n = 0
for i = 4, #ARGV do
  local idle = P .. 'idle:' .. ARGV[i]
  if hold > 0 then
    redis.call('ZREMRANGEBYSCORE', idle, '-inf', expired)
    redis.call('ZADD', idle, until_text, member)
    n = n + 1
  else
    redis.call('ZREM', idle, member)
  end
end
return n
