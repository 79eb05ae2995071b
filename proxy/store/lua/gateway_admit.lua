-- Admit one request for a gateway key, atomically, against its budget, rpm and tpm.
-- The clock is the server's (TIME), so every replica measures the same minute.
--
-- KEYS[1] rpm sorted set   KEYS[2] tpm hash (second -> tokens)
-- KEYS[3] this day's usage hash   KEYS[4] this month's usage hash
-- ARGV[1] rpm (0 = none)   ARGV[2] tpm (0 = none)   ARGV[3] tokens to reserve
-- ARGV[4] budget tokens (0 = none)   ARGV[5] budget period: day | month
-- ARGV[6] a unique member for this request   ARGV[7] day key ttl s   ARGV[8] month key ttl s
--
-- Returns {verdict, limit, requests used, requests reset ms, tokens used, tokens reset ms,
--          retry after ms, second}
--   verdict 0 admitted, 1 over a rate limit (limit = requests | tokens), 2 budget spent.
--   "used" counts include this request when admitted; reset = when the oldest entry of the
--   window leaves it; second = the tpm bucket the reservation went to.
local now_parts = redis.call('TIME')
local sec = tonumber(now_parts[1])
local now = sec * 1000 + math.floor(tonumber(now_parts[2]) / 1000)
local rpm, tpm, reserve = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local budget, period = tonumber(ARGV[4]), ARGV[5]

local function count_refusal()
  redis.call('HINCRBY', KEYS[3], 'refused', 1)
  redis.call('EXPIRE', KEYS[3], ARGV[7])
  redis.call('HINCRBY', KEYS[4], 'refused', 1)
  redis.call('EXPIRE', KEYS[4], ARGV[8])
end

-- requests in the rolling minute
local requests, requests_reset = 0, 0
if rpm > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 60000)
  requests = redis.call('ZCARD', KEYS[1])
  if requests > 0 then
    local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    requests_reset = tonumber(oldest[2]) + 60000 - now
  end
end

-- tokens in the rolling minute: buckets of the last 61 seconds (a bucket leaves the
-- window only once every moment in it is more than 60 s old)
local tokens, tokens_reset = 0, 0
local live = {}
if tpm > 0 then
  local raw = redis.call('HGETALL', KEYS[2])
  for i = 1, #raw, 2 do
    local second, amount = tonumber(raw[i]), tonumber(raw[i + 1])
    if second <= sec - 61 then
      redis.call('HDEL', KEYS[2], raw[i])
    else
      tokens = tokens + amount
      table.insert(live, {second, amount})
    end
  end
  table.sort(live, function(a, b) return a[1] < b[1] end)
  if #live > 0 then
    tokens_reset = (live[1][1] + 61) * 1000 - now
  end
end

if budget > 0 then
  local budget_key = KEYS[3]
  if period == 'month' then budget_key = KEYS[4] end
  local spent = tonumber(redis.call('HGET', budget_key, 'tokens') or '0')
  if spent >= budget then
    count_refusal()
    return {2, 'budget', requests, requests_reset, tokens, tokens_reset, 0, sec}
  end
end

if rpm > 0 and requests >= rpm then
  count_refusal()
  return {1, 'requests', requests, requests_reset, tokens, tokens_reset, requests_reset, sec}
end

if tpm > 0 and (tokens >= tpm or tokens + reserve > tpm) then
  -- wait until enough buckets leave the window; a request larger than tpm waits a minute
  local retry, freed = 60000, 0
  for _, bucket in ipairs(live) do
    freed = freed + bucket[2]
    if tokens - freed < tpm and tokens - freed + reserve <= tpm then
      retry = (bucket[1] + 61) * 1000 - now
      break
    end
  end
  count_refusal()
  return {1, 'tokens', requests, requests_reset, tokens, tokens_reset, retry, sec}
end

if rpm > 0 then
  redis.call('ZADD', KEYS[1], now, ARGV[6])
  redis.call('PEXPIRE', KEYS[1], 61000)
  requests = requests + 1
  if requests_reset == 0 then requests_reset = 60000 end
end
if tpm > 0 and reserve > 0 then
  redis.call('HINCRBY', KEYS[2], sec, reserve)
  redis.call('EXPIRE', KEYS[2], 62)
  if tokens_reset == 0 then tokens_reset = 61000 end
end
tokens = tokens + reserve
for i, ttl in ipairs({ARGV[7], ARGV[8]}) do
  redis.call('HINCRBY', KEYS[2 + i], 'requests', 1)
  redis.call('HINCRBY', KEYS[2 + i], 'tokens', reserve)
  redis.call('EXPIRE', KEYS[2 + i], ttl)
end
return {0, '', requests, requests_reset, tokens, tokens_reset, 0, sec}
