-- Land a compaction: new window state, boundary, journal event and archived span, atomically.
-- KEYS: 1 meta, 2 turns, 3 links, 4 chain, 5 events, 6 archive
-- ARGV: 1 expected current window id, 2 window JSON, 3 boundary seq, 4 event JSON,
--       5 archive id, 6 span JSON, 7 ttl seconds
-- Returns 1 when it landed, 0 when another compaction changed the window first.
local current = redis.call('HGET', KEYS[1], 'window_id') or 'win_0'
if current ~= ARGV[1] then
  return 0
end
local window = cjson.decode(ARGV[2])
redis.call('HSET', KEYS[1], 'window', ARGV[2], 'window_id', window['current'], 'boundary', ARGV[3], 'breaker', 0)
redis.call('RPUSH', KEYS[5], ARGV[4])
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[6], ARGV[5], ARGV[6])
end
local ttl = tonumber(ARGV[7])
for i = 1, 6 do
  redis.call('EXPIRE', KEYS[i], ttl)
end
return 1
