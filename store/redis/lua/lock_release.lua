-- lock_release: compare-and-delete a named lock.
--
-- KEYS[1]      lock hash: owner, expires_at
-- ARGV[1]      owner
-- Returns:     1 released, 0 the lock is free or someone else's
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
