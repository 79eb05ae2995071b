-- Append one turn to a session's journal, atomically.
-- KEYS: 1 meta, 2 turns, 3 links, 4 chain, 5 events, 6 archive, 7 ends,
--       8 the tenant's session index: only on a single server; on a cluster it lives in
--       another slot and touch_index.lua updates it in a call of its own
-- ARGV: 1 turn JSON, 2 parent ("head" or a seq, -1 = root), 3 completed ("1"/"0"),
--       4 ttl seconds, 5 message hashes of the turn (space separated, input then output),
--       6 now (unix seconds, to the millisecond: the index's order), 7 the session id (its index member), 8 usage feedback JSON ('' = none),
--       9 a fresh random epoch, kept only if the session is new (its first turn, seq 0: it
--       tells a recreated session from the deleted one it replaces, for the callers' caches)
-- Returns {seq, parent, depth}.
-- A "head" parent is resolved here, at commit time: concurrent delta requests on one
-- session are thereby journaled in commit order, each exactly once, whichever proxy
-- process serves them. Only a completed turn moves the head and enters the chain index
-- and `ends` (its output hash -> seq, how a trimming client's window is found). The chain
-- index holds a turn's end ('e') and, for a root turn only, its messages before the end ('i'):
-- the longest 'e' hit is where a conversation attaches, and an 'i' hit matters only when
-- there is none, inside the first turn (a retry of it). A link
-- is "parent depth *" then the chain hash in its 20 bytes (all zero: none yet) and the turn's
-- message hashes, comma-separated, which let load_context.lua check a trimmed window message
-- by message; a link keeps the first 16 characters of each (64 bits tell the messages of one
-- session's path apart). Short enough for Redis' compact hash encoding. Links written before
-- are "parent depth chain hashes", in hex, with whole hashes; both forms are read.
local TTL_REFRESH_S = 60
local LINK_HASH_CHARS = 16
local NO_CHAIN = string.rep('0', 40)
local parent = ARGV[2]
if parent == 'head' then
  parent = redis.call('HGET', KEYS[1], 'head') or '-1'
end
parent = tonumber(parent)
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1) - 1
local depth, chain = 0, ''
if parent >= 0 then
  local link = redis.call('HGET', KEYS[3], parent)
  if not link then
    return redis.error_reply('parent turn ' .. parent .. ' does not exist')
  end
  depth = tonumber(string.match(link, '^%S+ (%S+)')) + 1
  local at = string.match(link, '^%S+ %S+ %*()')
  if at then
    chain = string.format('%08x%08x%08x%08x%08x', struct.unpack('>I4I4I4I4I4', string.sub(link, at, at + 19)))
    if chain == NO_CHAIN then chain = '' end
  else
    chain = string.match(link, '^%S+ %S+ (%S*)')  -- a link written before the binary form
  end
end
local hashes, short = {}, {}
for mh in string.gmatch(ARGV[5], '%S+') do
  table.insert(hashes, mh)
  table.insert(short, string.sub(mh, 1, LINK_HASH_CHARS))
end
if ARGV[3] == '1' then
  local entries = {}
  for i, mh in ipairs(hashes) do
    chain = redis.sha1hex(chain .. mh)
    if i == #hashes then
      table.insert(entries, chain)
      table.insert(entries, 'e' .. seq)
    elseif parent < 0 then
      table.insert(entries, chain)
      table.insert(entries, 'i' .. seq)
    end
  end
  if #hashes > 0 then
    redis.call('HSET', KEYS[4], unpack(entries))
    redis.call('HSET', KEYS[7], hashes[#hashes], seq)
  end
end
local function packed(hex)  -- 40 hex digits -> their 20 bytes
  local words = {}
  for i = 1, 33, 8 do
    table.insert(words, tonumber(string.sub(hex, i, i + 7), 16))
  end
  return struct.pack('>I4I4I4I4I4', unpack(words))
end
redis.call('HSET', KEYS[3], seq, parent .. ' ' .. depth .. ' *' .. packed(chain ~= '' and chain or NO_CHAIN) .. table.concat(short, ','))
redis.call('HSET', KEYS[2], seq, ARGV[1])
local now = math.floor(tonumber(ARGV[6]))
local meta = {'updated', now}
if ARGV[3] == '1' then
  table.insert(meta, 'head')
  table.insert(meta, seq)
  if ARGV[8] ~= '' then
    table.insert(meta, 'usage')
    table.insert(meta, ARGV[8])
  end
end
redis.call('HSET', KEYS[1], unpack(meta))
if seq == 0 then
  redis.call('HSETNX', KEYS[1], 'created', now)
  redis.call('HSETNX', KEYS[1], 'epoch', ARGV[9])
end
-- The session's TTLs are refreshed at most once a minute (every half TTL when that is
-- shorter), not on every turn: each EXPIRE is a write the AOF and the replicas receive. How
-- long ago they were set is read off meta's own TTL, on the server's clock. A session's
-- first turn sets them all; the keys a later turn may create between two refreshes (the
-- chain index and `ends`, at the first completed turn) get theirs at once.
local ttl = tonumber(ARGV[4])
local elapsed = ttl - redis.call('TTL', KEYS[1])  -- more than ttl while meta has none (-1)
local refresh = seq == 0 or elapsed < 0 or elapsed >= math.min(TTL_REFRESH_S, ttl / 2)
if refresh then
  for i = 1, 7 do
    redis.call('EXPIRE', KEYS[i], ttl)
  end
elseif ARGV[3] == '1' then
  for _, i in ipairs({4, 7}) do
    if redis.call('TTL', KEYS[i]) == -1 then
      redis.call('EXPIRE', KEYS[i], ttl)
    end
  end
end
if KEYS[8] then
  -- as touch_index.lua: sessions whose keys have expired leave the index too
  redis.call('ZADD', KEYS[8], ARGV[6], ARGV[7])
  if refresh then
    redis.call('ZREMRANGEBYSCORE', KEYS[8], '-inf', tonumber(ARGV[6]) - ttl)
  end
  if refresh or redis.call('TTL', KEYS[8]) == -1 then
    redis.call('EXPIRE', KEYS[8], ttl)
  end
end
return {seq, parent, depth}
