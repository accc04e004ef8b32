-- shard_key: the owner of an idempotency or unique key of a sharded store
-- (store/redis/shards/key_owners.py, docs/architecture.md "Shards"), kept on the
-- key's shard whatever queue, so whatever shard, its jobs are on.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: key_owner:<kind>
--              (hash: key -> job id), key_state:<kind> (hash: key -> 'settled',
--              or the Redis TIME, whole seconds, the claim was made at)
-- ARGV[1]      'claim', 'settle' or 'release'
-- ARGV[2]      kind: 'idempotency' or 'unique'
-- ARGV[3]      the key
-- ARGV[4]      a job id: the claimant (claim), the owner (settle, release)
-- ARGV[5]      claim: the owner it replaces ('' when it expects none)
-- claim: taken when the key has no owner or still has the one replaced;
-- settle: the owner's job is written; release: its write was refused.
-- Returns:     claim: {1} taken, or {0, owner, state} (nothing written);
--              settle, release: 1 done, 0 the key has another owner

local owner, state = P .. 'key_owner:' .. ARGV[2], P .. 'key_state:' .. ARGV[2]
local key, id = ARGV[3], ARGV[4]
local current = redis.call('HGET', owner, key)
if ARGV[1] == 'claim' then
  if current and current ~= ARGV[5] then
    return {0, current, redis.call('HGET', state, key) or 'settled'}
  end
  redis.call('HSET', owner, key, id)
  redis.call('HSET', state, key, redis.call('TIME')[1])
  return {1}
end
if current ~= id then
  return 0
end
if ARGV[1] == 'settle' then
  redis.call('HSET', state, key, 'settled')
else
  redis.call('HDEL', owner, key)
  redis.call('HDEL', state, key)
end
return 1
