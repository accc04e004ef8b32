-- lock_release: compare-and-delete a named lock.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: lock:<name> (hash: owner, expires_at)
-- ARGV[1]      owner
-- ARGV[2]      lock name
-- Returns:     1 released, 0 the lock is free or someone else's
local lock = P .. 'lock:' .. ARGV[2]
local owner = redis.call('HGET', lock, 'owner')
if owner == ARGV[1] then
  redis.call('DEL', lock)
  return 1
end
return 0
