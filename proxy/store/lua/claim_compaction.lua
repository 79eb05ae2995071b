-- Take a session's compaction claim for the window a request loaded, atomically.
-- KEYS: 1 the claim (the session's compaction lock), 2 meta (the same hash tag: one slot)
-- ARGV: 1 the claim's token, 2 its ttl in milliseconds, 3 the window id the request loaded,
--       4 the id of a session's first window (what a meta without window_id is in)
-- Returns 1 when the claim was taken; 0 when another holds it, or when the stored window
-- is no longer ARGV[3] (a compaction landed since the request loaded the session: its
-- view is stale, and nothing is taken). So a held claim means "the window I loaded is
-- still the stored one": a compaction computed under it is computed from the stored window.
local current = redis.call('HGET', KEYS[2], 'window_id') or ARGV[4]
if current ~= ARGV[3] then
  return 0
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
return 0
