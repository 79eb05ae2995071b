-- Remember which derived session a completed turn's output belongs to, for one tenant.
-- KEYS: 1 ends (hash: output hash -> session id), 2 ages (zset: output hash by time)
-- ARGV: 1 output hash, 2 session id, 3 now (unix seconds), 4 ttl seconds, 5 most entries kept
-- A client that sends no session id and trims its history is found through this index
-- (see proxy/turn/derived.py). Entries expire with the session TTL, and the index keeps
-- the newest ARGV[5] entries; both are trimmed a little on every write, so each write
-- costs O(log n).
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', tonumber(ARGV[3]) - tonumber(ARGV[4]), 'LIMIT', 0, 64)
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[5])
if over > 0 then
  local oldest = redis.call('ZRANGE', KEYS[2], 0, math.min(over, 64) - 1)
  for _, h in ipairs(oldest) do
    table.insert(expired, h)
  end
end
if #expired > 0 then
  redis.call('HDEL', KEYS[1], unpack(expired))
  redis.call('ZREM', KEYS[2], unpack(expired))
end
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[4])
return #expired
