-- link_children: a child on another shard of a sharded store
-- (store/redis/shards/, docs/architecture.md "Shards") waits for parents of
-- this shard: the first of the two calls of its enqueue, made before the
-- child is written on its own shard (lua/enqueue_flow.lua, "r").
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: job:<parent>,
--              children:<parent>, remote_waiting:<parent>
-- ARGV[1]      the child's id
-- ARGV[2..]    parent ids (of this shard)
-- Each parent gets the child in children:<parent>; an unfinished one also
-- in remote_waiting:<parent> (its end then leaves an outbox entry for the
-- child, lib/dependencies.lua) and `has_children` set. A child never
-- written (its process died before the second call) leaves entries that
-- name no job: lua/parent_done.lua keeps their outcome a day, then it expires.
-- Returns:     {'missing', id} a parent does not exist (nothing written)
--              {'ok', status_1, status_2, ...} each parent's status, as linked

local child = ARGV[1]
local out = {'ok'}
for i = 2, #ARGV do
  local status = redis.call('HGET', P .. 'job:' .. ARGV[i], 'status')
  if not status then
    return {'missing', ARGV[i]}
  end
  out[i] = status
end
for i = 2, #ARGV do
  local parent = ARGV[i]
  redis.call('SADD', P .. 'children:' .. parent, child)
  local status = tonumber(out[i])
  if status ~= FLOW.status.Completed and status ~= FLOW.status.Failed and status ~= FLOW.status.Canceled then
    redis.call('SADD', P .. 'remote_waiting:' .. parent, child)
    redis.call('HSET', P .. 'job:' .. parent, 'has_children', 1)
  end
end
return out
