-- now: the store's clock, from the server that holds the deployment's keys.
--
-- KEYS[1]      the prefix (lib/keys.lua; not touched: it routes the call to the
--              node of the deployment's hash slot on Redis Cluster)
-- ARGV[1]      clock offset, seconds
-- Returns:     Redis TIME + offset, epoch seconds, as text
--
-- @include lib/clock.lua

return fmt(now)
