-- Load what composing the next request needs, in one round trip.
-- KEYS: 1 meta, 2 turns, 3 links, 4 chain, 5 ends
-- ARGV: 1 mode: 'prefix' or 'overlap',
--       2 the caller's cached path head (-1: none), 3 the "epoch:window id" it was cached in,
--       4 prefix mode: how many conversation messages come before the first hash,
--       5 prefix mode: the chain hashes of the conversation's prefixes, shortest first, each
--           40 characters, in one string (only those looked at become strings here);
--       5.. overlap mode: the message hashes of the conversation, in order.
-- Returns {head, parent, matched, found, window_applies, window, usage, breaker, version, extends, seq1, turn1, ...}
--   version: "<epoch>:<window id>", what a cached path is valid for.
--   found: 0 nothing of the request is in the journal (a delta client or a new
--     session); 1 a prefix of the conversation is (a full-history client): parent is
--     the last turn that ends inside it (-1 if none) and `matched` the number of
--     conversation messages up to that turn's end; 2 (overlap mode) the conversation
--     starts with a run of the session's path that ends at turn `parent` (a client
--     that trims its history): `matched` messages of it are that run (and at most one
--     message before it that the journal does not hold, the app's own summary). The run
--     must hold one whole journal turn; it is found through `ends` (a turn's output
--     hash -> its seq) and checked message by message against the links' hashes.
--     With found = 0 parent is the head.
--   The turns returned are the path from parent back to the window's boundary turn
--   (exclusive), oldest first. When the boundary is not on that path (a branch that
--   left before it), the whole path is returned and window_applies is 0.
--   extends: 1 when the walk reached the caller's cached head in the same window, so
--     only the turns after it are returned (turns and parent links never change, so
--     the cached part is still exact); window and window_applies are then not sent.
local head = tonumber(redis.call('HGET', KEYS[1], 'head') or '-1')
local known = tonumber(ARGV[2])
local parent, matched, found = head, 0, 0
local FIRST = 5

local function overlap_ends_at(seq, k)
  -- Does the conversation's message k close a run of the path that ends at turn seq and
  -- reaches back to the conversation's start (or to its second message)?
  local j, cur, whole = k, seq, 0
  while j >= 1 and cur >= 0 do
    local link = redis.call('HGET', KEYS[3], cur)
    local up, at = string.match(link, '^(%S+) %S+ %*()')
    local hashes
    if up then
      hashes = string.sub(link, at + 20)  -- after the chain hash's 20 bytes
      if hashes == '' then hashes = nil end
    else
      up, hashes = string.match(link, '^(%S+) %S+ %S* (%S+)$')  -- a link of the hex form
    end
    if not hashes then
      return false  -- a turn journaled before message hashes were kept in its link
    end
    local list = {}
    for h in string.gmatch(hashes, '[^,]+') do
      table.insert(list, h)
    end
    local m = #list
    while m >= 1 and j >= 1 do
      if list[m] ~= string.sub(ARGV[FIRST + j - 1], 1, #list[m]) then  -- a link may keep a hash's prefix
        return j == 1 and whole > 0
      end
      m, j = m - 1, j - 1
    end
    if m == 0 then
      whole = whole + 1
    end
    cur = tonumber(up)
  end
  return j == 0 and whole > 0
end

if ARGV[1] == 'prefix' then
  local offset, prefixes = tonumber(ARGV[4]), ARGV[FIRST]
  for i = #prefixes / 40, 1, -1 do
    local hit = redis.call('HGET', KEYS[4], string.sub(prefixes, i * 40 - 39, i * 40))
    if hit then
      if found == 0 then
        found = 1
        parent, matched = -1, 0
      end
      if string.sub(hit, 1, 1) == 'e' then
        parent = tonumber(string.sub(hit, 2))
        matched = offset + i
        break
      end
    end
  end
else
  for k = #ARGV - FIRST + 1, 1, -1 do
    local seq = redis.call('HGET', KEYS[5], ARGV[FIRST + k - 1])
    if seq and overlap_ends_at(tonumber(seq), k) then
      found, parent, matched = 2, tonumber(seq), k
      break
    end
  end
end
local meta = redis.call('HMGET', KEYS[1], 'window', 'usage', 'breaker', 'window_id', 'boundary', 'epoch')
local version = (meta[6] or '') .. ':' .. (meta[4] or 'win_0')
local boundary = tonumber(meta[5] or '-1')
if version ~= ARGV[3] then
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
local out = {head, parent, matched, found, applies, window, meta[2] or '', meta[3] or '0', version, extends}
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
