-- flow_usage: what a queue uses of its limits now (read only but for pruning
-- rate windows): store/redis/flow.py builds store.flow_rules.Usage from it.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: limits, running,
--              running_keys:<queue>, starts:<queue>, rate_keys:<queue>,
--              key_starts:<queue>\0<key>
-- ARGV[1]      clock offset, seconds
-- ARGV[2]      queue name
-- Returns:     {now, limits JSON or '', running, {key, n, ...} running by key,
--              starts in the rate window, oldest of them or '',
--              {key, n, oldest, ...} starts by key in the per-key window}
--
-- @include lib/clock.lua

local queue = ARGV[2]
local L = flow.limits(queue)
if not L then
  return {now_text, '', 0, {}, 0, '', {}}
end
local U = flow.usage(queue, L)
local by_key = redis.call('HGETALL', P .. 'running_keys:' .. queue)
local starts_by_key = {}
if L.per_key_rate then
  local keys = P .. 'rate_keys:' .. queue
  redis.call('ZREMRANGEBYSCORE', keys, '-inf', fmt(now - L.per_key_rate.period_s))
  local candidates = {}
  for i, key in ipairs(redis.call('ZRANGE', keys, 0, -1)) do
    candidates[i] = {'', key}
  end
  flow.load_keys(U, queue, {per_key_rate = L.per_key_rate}, candidates)
  for key, s in pairs(U.starts_by_key) do
    starts_by_key[#starts_by_key + 1] = key
    starts_by_key[#starts_by_key + 1] = s[1]
    starts_by_key[#starts_by_key + 1] = fmt(s[2])
  end
end
return {now_text, redis.call('HGET', P .. 'limits', queue), U.running, by_key, U.starts,
  U.first_start and fmt(U.first_start) or '', starts_by_key}
