-- parent_done: apply outbox entries of other shards to children of this
-- one (store/redis/shards/, docs/architecture.md "Shards"): parent `parent`
-- of child `child` ended `outcome`. Applied at most once in effect: the
-- parent leaves remote_pending:<child> as it is applied (SREM), so a replay
-- (two drains, a drain that died before it removed the entry) changes
-- nothing. An entry for a child not written yet (its enqueue's second call
-- still to come) is kept in parent_done:<child> for lua/enqueue_flow.lua,
-- expiring after a day.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: job:<child>,
--              remote_pending:<child>, parent_done:<child>, and those lib/job.lua
--              and lib/dependencies.lua write
-- ARGV[1..3]   clock offset, events kept per job, 0 (lib/job.lua)
-- ARGV[4..]    entries, 4 values each: child id, parent id, outcome (status
--              code), actor ('' none)
-- Returns:     how many entries changed a child
--
-- @include lib/clock.lua
-- @include lib/job.lua

local applied = 0
for i = 4, #ARGV, 4 do
  local child, parent, outcome, actor = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), none(ARGV[i + 3])
  if redis.call('EXISTS', P .. 'job:' .. child) == 0 then
    redis.call('HSET', P .. 'parent_done:' .. child, parent, outcome)
    redis.call('PEXPIRE', P .. 'parent_done:' .. child, 86400000)
  elseif redis.call('SREM', P .. 'remote_pending:' .. child, parent) == 1 then
    applied = applied + 1
    if flow.settle(child, parent, outcome, actor) then
      flow.finished(child, FLOW.status.Canceled, actor)
    end
  end
end
flush_counts()
return applied
