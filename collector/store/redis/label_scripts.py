"""The Lua scripts of the Redis label store (`collector.store.redis.labels`). Each runs atomically;
the keys of a scorer's kept scores are built from the base given (`LabelKeys.kept_base`, under
the deployment's hash tag, so in the slot of the key given); comments list KEYS and ARGV.
Times travel as decimal strings (Python's ``repr``), which Redis reads exactly.
"""

from __future__ import annotations

# Keep each label unless the kept one of its identity is newer, or the same.
# KEYS: labels; ARGV: (identity JSON, label JSON, at) triples. Returns how many were new or changed.
PUT_LABELS = """
local changed = 0
for i = 1, #ARGV, 3 do
  local kept = redis.call('HGET', KEYS[1], ARGV[i])
  if kept ~= ARGV[i + 1] and (not kept or tonumber(ARGV[i + 2]) >= tonumber(cjson.decode(kept).at)) then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
    changed = changed + 1
  end
end
return changed
"""

# Take or renew the lease. KEYS: lease; ARGV: holder, ttl ms. Returns 1 if held.
TAKE_LEASE = """
local holder = redis.call('GET', KEYS[1])
if holder == false or holder == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""

# Give the lease up if the holder has it. KEYS: lease; ARGV: holder.
RELEASE_LEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
end
return 0
"""

_BUCKET = """
local function bucket(m, count)
  return (string.byte(m, 1) * 256 + string.byte(m, 2)) % count
end
"""

# Keep scores: per scorer, record its series, add (or replace) each member's time and row, and
# trim it to the most recent `max`; then drop every scorer's scores older than the cutoff, and
# forget a scorer left with none.
# KEYS: kept scorers; ARGV: kept base, max, cutoff, row hashes of a new scorer, then per scorer:
# scorer id, series count, (ref, series JSON)..., score count, (member, at, row)...
KEEP_SCORES = _BUCKET + """
local base, max, cutoff = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local function drop(scorer, times, members)
  local count = tonumber(redis.call('HGET', base .. 'm:' .. scorer, 'b') or '1')
  for first = 1, #members, 1000 do  -- unpack takes a bounded number of values
    local some = {unpack(members, first, math.min(first + 999, #members))}
    for _, m in ipairs(some) do
      redis.call('HDEL', base .. 'r' .. bucket(m, count) .. ':' .. scorer, m)
    end
    redis.call('ZREM', times, unpack(some))
  end
end
local i = 5
while i <= #ARGV do
  local scorer = ARGV[i]
  local times, meta = base .. 'z:' .. scorer, base .. 'm:' .. scorer
  redis.call('SADD', KEYS[1], scorer)
  redis.call('HSETNX', meta, 'b', ARGV[4])
  local count = tonumber(redis.call('HGET', meta, 'b'))
  i = i + 2
  for _ = 1, tonumber(ARGV[i - 1]) do
    redis.call('HSETNX', meta, ARGV[i], ARGV[i + 1])
    i = i + 2
  end
  i = i + 1
  for _ = 1, tonumber(ARGV[i - 1]) do
    redis.call('ZADD', times, ARGV[i + 1], ARGV[i])
    redis.call('HSET', base .. 'r' .. bucket(ARGV[i], count) .. ':' .. scorer, ARGV[i], ARGV[i + 2])
    i = i + 3
  end
  local excess = redis.call('ZCARD', times) - max
  if excess > 0 then drop(scorer, times, redis.call('ZRANGE', times, 0, excess - 1)) end
end
for _, scorer in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local times = base .. 'z:' .. scorer
  drop(scorer, times, redis.call('ZRANGEBYSCORE', times, '-inf', '(' .. cutoff))
  if redis.call('ZCARD', times) == 0 then
    redis.call('SREM', KEYS[1], scorer)
    redis.call('DEL', base .. 'm:' .. scorer)
  end
end
return 0
"""

# Up to n of a scorer's scores after (at, member), by (at, member): flat member, at, row
# triples (a row missing: ''). Members tied at `at` are compared byte by byte (Lua's string
# comparison follows the locale).
# KEYS: the scorer's times; ARGV: kept base, scorer id, at, member, n.
KEPT_PAGE = _BUCKET + """
local base, scorer, since, after, n = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local count = tonumber(redis.call('HGET', base .. 'm:' .. scorer, 'b') or '1')
local function later(m)
  for j = 1, math.min(#m, #after) do
    local a, b = string.byte(m, j), string.byte(after, j)
    if a ~= b then return a > b end
  end
  return #m > #after
end
local out, offset = {}, 0
while #out < 3 * n do
  local found = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[3], '+inf', 'WITHSCORES', 'LIMIT', offset, n)
  if #found == 0 then break end
  for j = 1, #found, 2 do
    local m, at = found[j], found[j + 1]
    if #out < 3 * n and (tonumber(at) > since or later(m)) then
      out[#out + 1] = m
      out[#out + 1] = at
      out[#out + 1] = redis.call('HGET', base .. 'r' .. bucket(m, count) .. ':' .. scorer, m) or ''
    end
  end
  offset = offset + n
end
return out
"""

# How many scores are kept. KEYS: kept scorers; ARGV: kept base.
KEPT_COUNT = """
local total = 0
for _, scorer in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  total = total + redis.call('ZCARD', ARGV[1] .. 'z:' .. scorer)
end
return total
"""
