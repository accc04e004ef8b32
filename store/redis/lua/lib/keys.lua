-- lib/keys.lua: the deployment's key prefix, a section of the library's top
-- level (store/redis/scripts.py). Every function runs start_keys() first.
--
-- KEYS[1]: the prefix, '{<deployment>}:' (store/redis/keys.py Keys.route): the
--          only declared key of every call. Its hash tag routes the call to
--          the node of the deployment's slot; the key itself is never touched.
-- ARGV: none of its own.
-- Returns: nothing. Defines `P`, the prefix: every key a function touches is
-- built inside it as P .. '<literal>' [.. data] (keys.py has the schema), so
-- all of them hash to the slot of KEYS[1] (Redis Cluster refuses any other).

local P
local function start_keys()
  P = KEYS[1]
end
