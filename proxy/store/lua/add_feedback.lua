-- Append feedback to one journal turn (the turn itself is never edited), atomically.
-- KEYS: 1 meta, 2 turns
-- ARGV: 1 turn seq, 2 feedback entry JSON, 3 the preferred reply it carries ('' = none)
-- Returns 1, or 0 when the session has no such turn.
-- The entries of turn N are the JSON list in meta field `feedback:N`; the latest preferred
-- reply of every turn is the JSON object in meta field `preferred` (seq -> text), so a
-- context that sends preferred replies reads one field.
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then
  return 0
end
local field = 'feedback:' .. ARGV[1]
local existing = redis.call('HGET', KEYS[1], field)
if existing then
  redis.call('HSET', KEYS[1], field, string.sub(existing, 1, -2) .. ',' .. ARGV[2] .. ']')
else
  redis.call('HSET', KEYS[1], field, '[' .. ARGV[2] .. ']')
end
if ARGV[3] ~= '' then
  local raw = redis.call('HGET', KEYS[1], 'preferred')
  local preferred = {}
  if raw then
    preferred = cjson.decode(raw)
  end
  preferred[ARGV[1]] = ARGV[3]
  redis.call('HSET', KEYS[1], 'preferred', cjson.encode(preferred))
end
return 1
