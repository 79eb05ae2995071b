-- Mark a session as used in its tenant's index (the cluster's half of append_turn.lua).
-- KEYS: 1 the tenant's session index
-- ARGV: 1 now (unix seconds, to the millisecond), 2 the session id, 3 ttl seconds
-- Returns 1. Sessions whose keys have expired leave the index too; the index itself
-- expires with the tenant's last session.
local ttl = tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - ttl)
redis.call('EXPIRE', KEYS[1], ttl)
return 1
