-- Create or revoke a run-time gateway key and bump the registry's version.
--
-- KEYS[1] registry hash (name -> policy JSON)   KEYS[2] registry version counter
-- ARGV[1] create | revoke   ARGV[2] name   ARGV[3] policy JSON (create only)
--
-- Returns 1 when the registry changed, 0 when the name already existed (create) or did
-- not exist (revoke).
local changed
if ARGV[1] == 'create' then
  changed = redis.call('HSETNX', KEYS[1], ARGV[2], ARGV[3])
else
  changed = redis.call('HDEL', KEYS[1], ARGV[2])
end
if changed == 1 then
  redis.call('INCR', KEYS[2])
end
return changed
