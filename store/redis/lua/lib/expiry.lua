-- lib/expiry.lua: the claim's end of a job past its expires_at (the
-- lifecycle table's expire row); a section of the library's top level after
-- lib/dependencies.lua and before lib/claim.lua, whose `lease` decides
-- (store.lifecycle.is_expired: now >= expires_at) from the job hash it
-- already read: no read of its own on the claim's path.
--
-- KEYS: none of its own (KEYS[1] is the prefix, lib/keys.lua).
-- ARGV: none of its own.
-- Keys written: job:<id>, events:<id>, the listing zsets (lib/listing.lua
-- `move`), and a parent's waiting children (lib/dependencies.lua).
-- Returns: nothing. Defines EXPIRED_ERROR, expire_job.

-- The error of an expired job (store.lifecycle.expiry_error), as JSON text.
local EXPIRED_ERROR = '{"type":"Expired","message":"not started by its expires_at; never run","traceback":null}'

-- End job `id` of `queue` (status `old`, one of the expire row's sources,
-- `name` its name, `token` its lease token, already out of the ready zset)
-- Canceled with EXPIRED_ERROR by the claim of `worker`: its listing entries
-- moved, the row's stamps and clears, its rank dropped, an expired event
-- appended, and with `parent` (it has children) its waiting children
-- settled as a cancel settles them.
local function expire_job(id, queue, old, name, token, worker, parent)
  local op = OPERATIONS['expire']
  settle(id)
  move(id, queue, old, op.target, name)
  change(id, op, op.target, {'error', EXPIRED_ERROR}, {'rank'})
  append_event(id, op.event, old, op.target, worker, tonumber(token) or 0, nil)
  if parent then
    flow.finished(id, op.target, worker)
  end
end
