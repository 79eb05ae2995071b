-- Load what composing the next request needs, in one round trip.
-- KEYS: 1 meta, 2 turns, 3 links, 4 chain
-- ARGV: 1 number of request messages before the first prefix hash,
--       2 the caller's cached path head (-1: none), 3 the "epoch:window id" it was cached in,
--       4.. the chain hashes of the request's message prefixes, shortest first (may be none).
-- Returns {head, parent, matched, found, window_applies, window, usage, breaker, window_id, extends, seq1, turn1, ...}
--   found: 0 no prefix of the request is in the journal (a delta client or a new
--     session); 1 some prefix is (a full-history client). parent is then the last
--     turn that ends inside the matched prefix (-1 if none) and `matched` the number
--     of request messages up to that turn's end; with found = 0 parent is the head.
--   The turns returned are the path from parent back to the window's boundary turn
--   (exclusive), oldest first. When the boundary is not on that path (a branch that
--   left before it), the whole path is returned and window_applies is 0.
--   extends: 1 when the walk reached the caller's cached head in the same window, so
--     only the turns after it are returned (turns and parent links never change, so
--     the cached part is still exact); window and window_applies are then not sent.
local head = tonumber(redis.call('HGET', KEYS[1], 'head') or '-1')
local offset = tonumber(ARGV[1])
local known = tonumber(ARGV[2])
local parent, matched, found = head, 0, 0
for i = #ARGV, 4, -1 do
  local hit = redis.call('HGET', KEYS[4], ARGV[i])
  if hit then
    if found == 0 then
      found = 1
      parent, matched = -1, 0
    end
    if string.sub(hit, 1, 1) == 'e' then
      parent = tonumber(string.sub(hit, 2))
      matched = offset + i - 3
      break
    end
  end
end
local meta = redis.call('HMGET', KEYS[1], 'window', 'usage', 'breaker', 'window_id', 'boundary', 'epoch')
local window_id = (meta[6] or '') .. ':' .. (meta[4] or 'win_0')
local boundary = tonumber(meta[5] or '-1')
if window_id ~= ARGV[3] then
  known = -2
end
local seqs = {}
local cur = parent
local applies = 1
local extends = 0
while cur >= 0 and cur ~= boundary do
  if cur == known then
    extends = 1
    break
  end
  table.insert(seqs, cur)
  local link = redis.call('HGET', KEYS[3], cur)
  cur = tonumber(string.match(link, '^(%S+)'))
end
if extends == 0 and boundary >= 0 and cur ~= boundary then
  applies = 0
end
local window = meta[1] or ''
if extends == 1 then
  window = ''
end
local out = {head, parent, matched, found, applies, window, meta[2] or '', meta[3] or '0', window_id, extends}
local n = #seqs
if n > 0 then
  local ordered = {}
  for i = n, 1, -1 do
    table.insert(ordered, seqs[i])
  end
  for first = 1, n, 500 do
    local last = math.min(first + 499, n)
    local turns = redis.call('HMGET', KEYS[2], unpack(ordered, first, last))
    for i = first, last do
      table.insert(out, ordered[i])
      table.insert(out, turns[i - first + 1])
    end
  end
end
return out
