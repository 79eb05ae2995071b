-- Correct a reservation by what the answer really used (delta = actual - reserved), and count
-- what composing saved in the admission's periods (the savings figures, docs/savings.md).
--
-- KEYS[1] tpm hash   KEYS[2] the admission's day usage hash   KEYS[3] its month usage hash
-- ARGV[1] the tpm bucket (second) of the admission   ARGV[2] delta tokens
-- ARGV[3] saved tokens (negative: history supplied)   ARGV[4] saved US dollars
--
-- A bucket that already left the window, or a period key that expired, is not recreated.
-- Returns 1.
local delta, saved, saved_usd = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if delta ~= 0 and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], ARGV[1], delta)
end
for i = 2, 3 do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    if delta ~= 0 then
      redis.call('HINCRBY', KEYS[i], 'tokens', delta)
    end
    if saved ~= 0 then
      redis.call('HINCRBY', KEYS[i], 'saved_tokens', saved)
    end
    if saved_usd ~= 0 then
      redis.call('HINCRBYFLOAT', KEYS[i], 'saved_usd', ARGV[4])
    end
  end
end
return 1
