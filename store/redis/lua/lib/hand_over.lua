-- lib/hand_over.lua: the hand-over of new jobs to idle workers, a section of
-- the library's top level after lib/claim.lua, whose `claim_jobs` leases
-- each job; called by lua/enqueue.lua, which includes lib/clock.lua and
-- lib/job.lua and calls flush_counts().
--
-- KEYS, ARGV: none of its own.
-- Keys written: idle:<queue>, hand:<worker>, and what `claim_jobs` writes.
-- Returns: nothing. Defines hand_over.

-- Milliseconds a hand-over list outlives its last push: the list of a worker
-- that died keeps its entries for recovery (which takes them off, as its
-- worker would have) long after their leases expire, but not for ever (a
-- handed job canceled or deleted meanwhile leaves its entry behind).
local HAND_KEPT_MS = '86400000'

-- Hand the ready `members` of `queue` (a list, claim handles of jobs this
-- call made ready) over to idle workers, one each, in order (an enqueue
-- leases to a worker waiting on the queue, docs/architecture.md, Hand-over).
-- Each registration of idle:<queue> (lua/idle.lua; member '<lease TTL s>
-- <worker id>', score its expiry in microseconds), the one renewed last
-- first (a worker that died while idle is the last to be picked), is taken
-- (when that one has expired, so has every other: the set is dropped) and
-- given the next member through
-- `claim_jobs` with the claim's row of the lifecycle table (pause decides as
-- in any notified claim), and the claim's reply entry is pushed on
-- that worker's list hand:<worker> (the same text)
-- (store/redis/wakeups.py pops it; the list expires HAND_KEPT_MS after its
-- last push). A registration whose claim leases nothing (paused) is put back
-- and the handing stops. A queue with limits hands nothing over (its claim
-- admits jobs in its own order, lib/flow.lua): its jobs wake a worker as
-- before. Returns how many jobs were handed.
local function hand_over(queue, members)
  local idle = P .. 'idle:' .. queue
  local handed, op = 0, nil
  while handed < #members do
    local got = redis.call('ZRANGE', idle, '-1', '-1', 'WITHSCORES')  -- texts: a number is formatted
    if #got == 0 then
      break
    end
    local member, score = got[1], got[2]
    if tonumber(score) < now * 1000000 then
      redis.call('DEL', idle)  -- the last renewed has expired: so has every other
      break
    end
    if op == nil then
      if flow.limits(queue) then
        break
      end
      op = operation('claim')
    end
    redis.call('ZREM', idle, member)
    local ttl, worker = string.match(member, '^(%S+) (.*)$')
    local out = claim_jobs(op, worker, tonumber(ttl), 1, 0, members[handed + 1], {queue})
    if #out == 0 then
      redis.call('ZADD', idle, score, member)
      break
    end
    local hand = P .. 'hand:' .. worker
    redis.call('RPUSH', hand, out[1])
    redis.call('PEXPIRE', hand, HAND_KEPT_MS)
    handed = handed + 1
  end
  return handed
end
