-- lib/enqueue_keys.lua: an enqueue's idempotency and unique keys, checked
-- before anything of its chunk is written; a section of the library's top
-- level after lib/job.lua (store/redis/scripts.py SECTIONS). No per-call state.
--
-- KEYS: none of its own (KEYS[1] is the prefix, lib/keys.lua).
-- ARGV: none of its own.
-- Keys read: idempotency, unique, unique_until, job:<id> (the holder's status).
-- Compiled in: ENQUEUE_BYTE (the letters of the optional values),
-- UNIQUE_HOLDING (the statuses that hold a unique key whatever its age).
-- Returns: nothing. Defines `keys_taken`.

-- The id of the job still holding unique key `key`, or nil when it is free:
-- held while its job exists with a status of UNIQUE_HOLDING, or until its
-- unique-until time (`now`, lib/clock.lua).
local function unique_holder(key)
  local id = redis.call('HGET', P .. 'unique', key)
  if not id then
    return nil  -- never taken
  end
  local status = redis.call('HGET', P .. 'job:' .. id, 'status')
  if not status then
    return nil  -- its job was removed
  end
  if UNIQUE_HOLDING[status] then
    return id
  end
  if now < tonumber(redis.call('HGET', P .. 'unique_until', key) or '0') then
    return id
  end
  return nil
end

-- The refusal of a chunk of `n` jobs whose optional values by letter byte
-- are `opts[i]` (nil: none): {'duplicate', key, id} for an idempotency key
-- taken ('' when repeated inside the chunk), {'unique', key, id} for a
-- unique key held, or nil when every key is free.
local function keys_taken(n, opts)
  local idempotency, unique = ENQUEUE_BYTE['idempotency_key'], ENQUEUE_BYTE['unique_key']
  local seen = nil
  for i = 1, n do
    local key = opts[i] and opts[i][idempotency]
    if key then
      seen = seen or {}
      if seen[key] then
        return {'duplicate', key, ''}
      end
      seen[key] = true
      local existing = redis.call('HGET', P .. 'idempotency', key)
      if existing then
        return {'duplicate', key, existing}
      end
    end
  end
  seen = nil
  for i = 1, n do
    local key = opts[i] and opts[i][unique]
    if key then
      seen = seen or {}
      if seen[key] then
        return {'unique', key, ''}
      end
      seen[key] = true
      local id = unique_holder(key)
      if id then
        return {'unique', key, id}
      end
    end
  end
  return nil
end
