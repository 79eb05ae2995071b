-- Correct a reservation by what the answer really used (delta = actual - reserved).
--
-- KEYS[1] tpm hash   KEYS[2] the admission's day usage hash   KEYS[3] its month usage hash
-- ARGV[1] the tpm bucket (second) of the admission   ARGV[2] delta tokens
--
-- A bucket that already left the window, or a period key that expired, is not recreated.
-- Returns 1.
local delta = tonumber(ARGV[2])
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], ARGV[1], delta)
end
for i = 2, 3 do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('HINCRBY', KEYS[i], 'tokens', delta)
  end
end
return 1
