-- Land a compaction: new window state, boundary, journal event and archived span, atomically.
-- KEYS: 1 meta, 2 turns, 3 links, 4 chain, 5 events, 6 archive, 7 ends
-- ARGV: 1 expected current window id, 2 window JSON, 3 boundary seq, 4 event JSON,
--       5 archive id, 6 span JSON, 7 ttl seconds, 8 a turn that must be on the head's
--       path ('' = no check; a background job passes its boundary turn)
-- Returns 1 when it landed, 0 when it is stale: another compaction changed the window
-- first, or the path the job compacted is no longer the session's (a branch moved the
-- head away from the span it summarized).
local current = redis.call('HGET', KEYS[1], 'window_id') or 'win_0'
if current ~= ARGV[1] then
  return 0
end
if ARGV[8] ~= '' then
  local target = tonumber(ARGV[8])
  local target_link = redis.call('HGET', KEYS[3], target)
  if not target_link then
    return 0
  end
  local target_depth = tonumber(string.match(target_link, '^%S+ (%S+)'))
  local cur = tonumber(redis.call('HGET', KEYS[1], 'head') or '-1')
  local found = false
  while cur >= 0 do
    if cur == target then
      found = true
      break
    end
    local link = redis.call('HGET', KEYS[3], cur)
    local parent, depth = string.match(link, '^(%S+) (%S+)')
    if tonumber(depth) <= target_depth then
      break
    end
    cur = tonumber(parent)
  end
  if not found then
    return 0
  end
end
local window = cjson.decode(ARGV[2])
redis.call('HSET', KEYS[1], 'window', ARGV[2], 'window_id', window['current'], 'boundary', ARGV[3], 'breaker', 0)
redis.call('RPUSH', KEYS[5], ARGV[4])
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[6], ARGV[5], ARGV[6])
end
local ttl = tonumber(ARGV[7])
for i = 1, 7 do
  redis.call('EXPIRE', KEYS[i], ttl)
end
return 1
