-- lib/ready.lua: the ready zsets and, for jobs with a limit key, the per-key
-- ready sets beside them (docs/architecture.md, Flow control), a section of
-- the library's top level after lib/job.lua (store/redis/scripts.py
-- SECTIONS). Every site that makes a job ready or takes it out of ready
-- calls it, so the per-key sets hold exactly the ready jobs with a limit key.
-- No per-call state.
--
-- KEYS: none of its own (KEYS[1] is the prefix, lib/keys.lua).
-- ARGV: none of its own.
-- Keys (store/redis/keys.py): ready:<queue>, scheduled:<queue>,
-- key_ready:<queue>\0<limit key>, key_heads:<queue>, keyed:<queue>, job:<id> (read).
-- Returns: nothing. Defines keyed_add, keyed_remove, ready_add, ready_remove, promote_due.

-- Add ready `member` (its rank) of a job of limit key `key` in `queue` to
-- key_ready:<queue>\0<key> (score 0: byte order is claim order, as in
-- ready:<queue>) and keyed:<queue> (every ready member with a key); when it is the key's new head,
-- it replaces the previous head in key_heads:<queue> (one member a key:
-- its head). Adding a member already there changes nothing.
local function keyed_add(queue, key, member)
  local set = P .. 'key_ready:' .. queue .. '\0' .. key
  if redis.call('ZADD', set, '0', member) == 0 then
    return
  end
  redis.call('ZADD', P .. 'keyed:' .. queue, '0', member)
  local head = redis.call('ZRANGE', set, '0', '1')
  if head[1] == member then
    local heads = P .. 'key_heads:' .. queue
    if head[2] then
      redis.call('ZREM', heads, head[2])
    end
    redis.call('ZADD', heads, '0', member)
  end
end

-- Take `member` of limit key `key` out of its key's set (the inverse of
-- keyed_add; the next member becomes the key's head). A member not there
-- changes nothing; an emptied set goes.
local function keyed_remove(queue, key, member)
  local set = P .. 'key_ready:' .. queue .. '\0' .. key
  local head = redis.call('ZRANGE', set, '0', '1')
  if redis.call('ZREM', set, member) == 0 then
    return
  end
  redis.call('ZREM', P .. 'keyed:' .. queue, member)
  if head[1] == member then
    local heads = P .. 'key_heads:' .. queue
    redis.call('ZREM', heads, member)
    if head[2] then
      redis.call('ZADD', heads, '0', head[2])
    end
  end
end

-- Make `member` of `queue` ready; `key` its job's limit key (nil/false: none).
local function ready_add(queue, member, key)
  redis.call('ZADD', P .. 'ready:' .. queue, '0', member)
  if key then
    keyed_add(queue, key, member)
  end
end

-- Take `member` of `queue` out of ready (its job's limit key read only when
-- it was there: most jobs taken out of ready are claimed, lib/claim.lua,
-- which reads it with the hash). Returns true when it was there.
local function ready_remove(queue, member)
  if redis.call('ZREM', P .. 'ready:' .. queue, member) == 0 then
    return false
  end
  -- the id follows the rank's 24 digits and ':' (store/redis/keys.py RANK_HEAD)
  local key = redis.call('HGET', P .. 'job:' .. string.sub(member, 26), 'limit_key')
  if key then
    keyed_remove(queue, key, member)
  end
  return true
end

-- Move due scheduled `member` of `queue` to ready (a claim's promotion:
-- one HGET of its limit key more than the two writes).
local function promote_due(queue, member)
  redis.call('ZREM', P .. 'scheduled:' .. queue, member)
  ready_add(queue, member, redis.call('HGET', P .. 'job:' .. string.sub(member, 26), 'limit_key'))
end
