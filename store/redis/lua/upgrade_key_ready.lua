-- upgrade_key_ready: put ready jobs with a limit key that waited before
-- layout 7 into their key's ready set (lib/ready.lua; store/redis/upgrade.py
-- ``key_ready``). Each member is read here, so it is safe beside running
-- workers: one claimed, canceled or deleted meanwhile is no longer in
-- ready:<queue> and is skipped, and one already in its key's set is left
-- as it is (a process of this layout made it ready).
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: ready:<queue>,
--              job:<id>, key_ready:<queue>\0<key>, key_heads:<queue>, keyed:<queue>
-- ARGV[1]      the queue
-- ARGV[1 + i]  its i-th ready member, read from ready:<queue>
-- Returns:     number of members added to a key's set

local queue, added = ARGV[1], 0
local ready = P .. 'ready:' .. queue
for i = 2, #ARGV do
  local member = ARGV[i]
  if redis.call('ZSCORE', ready, member) then
    -- the id follows the rank's 24 digits and ':' (store/redis/keys.py RANK_HEAD)
    local key = redis.call('HGET', P .. 'job:' .. string.sub(member, 26), 'limit_key')
    if key and not redis.call('ZSCORE', P .. 'keyed:' .. queue, member) then
      keyed_add(queue, key, member)
      added = added + 1
    end
  end
end
return added
