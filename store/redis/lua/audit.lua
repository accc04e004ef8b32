-- audit: an audit-log entry about no one job (a bulk operation's start or
-- outcome), counted like a job event.
--
-- KEYS[1]      the prefix (lib/keys.lua); keys built from it: counters, audit
-- ARGV[1..3]   common (clock offset s, events kept per job, audit entries kept)
-- ARGV[4]      event kind (EventKind.BULK_STARTED or BULK_FINISHED)
-- ARGV[5]      actor
-- ARGV[6]      message
-- Returns:     1
--
-- @include lib/clock.lua
-- @include lib/job.lua

audit_event('', ARGV[4], nil, nil, ARGV[5], nil, ARGV[6])
flush_counts()
return 1
