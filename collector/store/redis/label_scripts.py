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

# ------------------------------ kept scores
# A scorer's keys, from the base (`LabelKeys.kept_base`): meta ``m:<id>`` (b: row hashes, n: scores
# kept, q: the last shard id, series refs), the shard index ``i:<id>`` (shard id -> the least time
# it holds, strictly increasing: shard k holds the times from its bound up to the next shard's),
# time shards ``t<k>:<id>`` (member -> at in ms) and row hashes ``r<n>:<id>`` (member -> at in ms
# as a little-endian double, then the row).
_KEPT = """
local base = ARGV[1]
local function scorer_of(id)
  local s = {id = id, meta = base .. 'm:' .. id, index = base .. 'i:' .. id}
  local b, n = unpack(redis.call('HMGET', s.meta, 'b', 'n'))
  s.b, s.n = tonumber(b or '1'), tonumber(n or '0')
  return s
end
local function rows(s, m)
  return base .. 'r' .. ((string.byte(m, 1) * 256 + string.byte(m, 2)) % s.b) .. ':' .. s.id
end
local function shard(s, k)
  return base .. 't' .. k .. ':' .. s.id
end
local function shard_of(s, at)  -- the shard holding time `at` (nil: before the first)
  return redis.call('ZREVRANGEBYSCORE', s.index, at, '-inf', 'LIMIT', 0, 1)[1]
end
"""

# Keep scores: per scorer, record its series, then each score (a member kept already leaves the
# shard of its old time), cutting a shard that outgrows `cap` in two (the last one before its
# latest time, others in the middle, never between two entries of one time), trim the scorer to
# `max` (from its first shard on); then forget every scorer's scores before the cutoff, and a
# scorer left with none. The last shard and the sizes of the shards written are remembered
# (`s.last`, `s.sizes`) while nothing changes them: most times go to the last shard.
# KEYS: kept scorers; ARGV: kept base, max, cutoff ms, row hashes of a new scorer, cap, then per
# scorer: scorer id, series count, (ref, series JSON)..., score count, (member, at ms, row)...
KEEP_SCORES = _KEPT + """
local max, cap = tonumber(ARGV[2]), tonumber(ARGV[5])
local function new_shard(s, at)
  local k = tostring(redis.call('HINCRBY', s.meta, 'q', 1))
  redis.call('ZADD', s.index, at, k)
  s.last = nil
  return k
end
local function last_of(s)  -- {id, bound} of the last shard (false: none yet)
  if s.last == nil then
    local found = redis.call('ZRANGE', s.index, -1, -1, 'WITHSCORES')
    s.last = found[1] and {found[1], tonumber(found[2])} or false
  end
  return s.last
end
local function split(s, k)
  local entries = redis.call('ZRANGE', shard(s, k), 0, -1, 'WITHSCORES')
  local count, last = #entries / 2, last_of(s)
  local function same(j) return entries[2 * j] == entries[2 * j - 2] end
  local cut
  if last and last[1] == k then
    cut = count
    while cut > 1 and same(cut) do cut = cut - 1 end
  else
    cut = math.floor(count / 2) + 1
    while cut <= count and same(cut) do cut = cut + 1 end
    if cut > count then
      cut = math.floor(count / 2) + 1
      while cut > 1 and same(cut) do cut = cut - 1 end
    end
  end
  if cut <= 1 then  -- one time only: it stays whole (and is not read again by this call)
    s.whole[k] = true
    return
  end
  local moved, id = {}, new_shard(s, entries[2 * cut])
  for j = cut, count do
    moved[#moved + 1] = entries[2 * j]
    moved[#moved + 1] = entries[2 * j - 1]
  end
  redis.call('ZADD', shard(s, id), unpack(moved))
  redis.call('ZREMRANGEBYRANK', shard(s, k), cut - 1, -1)
  s.sizes[k], s.sizes[id] = cut - 1, count - cut + 1
end
local function leave(s, m, at)  -- take member m, kept at `at`, out of its shard
  local k = shard_of(s, at)
  if k and redis.call('ZREM', shard(s, k), m) == 1 then
    s.sizes[k] = nil
    if redis.call('EXISTS', shard(s, k)) == 0 then
      redis.call('ZREM', s.index, k)
      s.last = nil
    end
  end
end
local function insert(s, m, at, row)
  local key = rows(s, m)
  if redis.call('HSETNX', key, m, row) == 1 then
    s.n = s.n + 1
  else
    local was = struct.unpack('<d', redis.call('HGET', key, m))
    redis.call('HSET', key, m, row)
    if was == tonumber(at) then return end
    leave(s, m, string.format('%.17g', was))
  end
  local last, k = last_of(s), nil
  if last and tonumber(at) >= last[2] then
    k = last[1]
  else
    k = shard_of(s, at)
    if not k then
      k = redis.call('ZRANGE', s.index, 0, 0)[1]
      if k then  -- before the first shard: it starts earlier
        redis.call('ZADD', s.index, at, k)
        s.last = nil
      else
        k = new_shard(s, at)
      end
    end
  end
  redis.call('ZADD', shard(s, k), at, m)  -- m is new to it (it left its old shard)
  local size = s.sizes[k] and s.sizes[k] + 1 or redis.call('ZCARD', shard(s, k))
  s.sizes[k] = size
  if size > cap and not s.whole[k] then split(s, k) end
end
local function drop(s, excess, before)  -- the `excess` oldest, or (without) those before `before`
  while excess == nil or excess > 0 do
    local k = redis.call('ZRANGE', s.index, 0, 0)[1]
    if not k then break end
    local key = shard(s, k)
    local gone
    if excess then gone = redis.call('ZRANGE', key, 0, excess - 1)
    else gone = redis.call('ZRANGEBYSCORE', key, '-inf', '(' .. before) end
    for first = 1, #gone, 1000 do  -- unpack takes a bounded number of values
      local some = {unpack(gone, first, math.min(first + 999, #gone))}
      for _, m in ipairs(some) do redis.call('HDEL', rows(s, m), m) end
      redis.call('ZREM', key, unpack(some))
    end
    s.n = s.n - #gone
    if excess then excess = excess - #gone end
    if redis.call('EXISTS', key) == 0 then
      redis.call('ZREM', s.index, k)
    else
      if #gone > 0 then  -- its bound moves up to what it holds: the next call sees it has nothing older
        redis.call('ZADD', s.index, redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2], k)
      end
      if not excess then break end
    end
  end
end
local i = 6
while i <= #ARGV do
  redis.call('SADD', KEYS[1], ARGV[i])
  redis.call('HSETNX', base .. 'm:' .. ARGV[i], 'b', ARGV[4])
  local s = scorer_of(ARGV[i])
  i = i + 2
  for _ = 1, tonumber(ARGV[i - 1]) do
    redis.call('HSETNX', s.meta, ARGV[i], ARGV[i + 1])
    i = i + 2
  end
  i = i + 1
  s.sizes, s.whole = {}, {}
  for _ = 1, tonumber(ARGV[i - 1]) do
    insert(s, ARGV[i], ARGV[i + 1], ARGV[i + 2])
    i = i + 3
  end
  if s.n > max then drop(s, s.n - max, nil) end
  redis.call('HSET', s.meta, 'n', s.n)
end
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local first = redis.call('ZRANGE', base .. 'i:' .. id, 0, 0, 'WITHSCORES')
  if not first[1] or tonumber(first[2]) < tonumber(ARGV[3]) then  -- it may hold scores before the cutoff
    local s = scorer_of(id)
    drop(s, nil, ARGV[3])
    if s.n > 0 then
      redis.call('HSET', s.meta, 'n', s.n)
    else
      redis.call('SREM', KEYS[1], id)
      redis.call('DEL', s.meta, s.index)
    end
  end
end
return 0
"""

# Up to n of a scorer's scores after (at, member), by (at, member): flat member, at ms, row
# triples (a row gone meanwhile: ''). Members tied at `at` are compared byte by byte (Lua's
# string comparison follows the locale).
# KEYS: the scorer's shard index; ARGV: kept base, scorer id, at ms, member, n.
KEPT_PAGE = _KEPT + """
local s = scorer_of(ARGV[2])
local since, after, n = tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local function later(m)
  for j = 1, math.min(#m, #after) do
    local a, b = string.byte(m, j), string.byte(after, j)
    if a ~= b then return a > b end
  end
  return #m > #after
end
local out = {}
local k = shard_of(s, since) or redis.call('ZRANGE', s.index, 0, 0)[1]
while k and #out < 3 * n do
  local found = redis.call('ZRANGEBYSCORE', shard(s, k), since, '+inf', 'WITHSCORES')
  for j = 1, #found, 2 do
    local m, at = found[j], found[j + 1]
    if #out < 3 * n and (tonumber(at) > since or later(m)) then
      out[#out + 1] = m
      out[#out + 1] = at
      out[#out + 1] = redis.call('HGET', rows(s, m), m) or ''
    end
  end
  local rank = redis.call('ZRANK', s.index, k)
  k = rank and redis.call('ZRANGE', s.index, rank + 1, rank + 1)[1]
end
return out
"""

# How many scores are kept. KEYS: kept scorers; ARGV: kept base.
KEPT_COUNT = """
local total = 0
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  total = total + tonumber(redis.call('HGET', ARGV[1] .. 'm:' .. id, 'n') or '0')
end
return total
"""

# ------------------------------ what judges were shown (few-shot scorers)
# A scorer's keys, from the base (`LabelKeys.shown_base`): ``c:<id>`` item -> [trace, at, content] JSON,
# ``a:<id>`` item -> at (ms), ``x:<id>`` trace -> its newest item.
# Keep each content unless the item's kept one is newer; trim every scorer written to `max` (oldest
# first); then forget every scorer's content before the cutoff, and a scorer left with none.
# KEYS: shown scorers; ARGV: shown base, max, cutoff ms, then (scorer id, item, trace, at ms, row) quintuples.
KEEP_SHOWN = """
local base, max, cutoff = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local function keys_of(id) return base .. 'c:' .. id, base .. 'a:' .. id, base .. 'x:' .. id end
local function forget(id, items)
  local c, a, x = keys_of(id)
  for _, m in ipairs(items) do
    local row = redis.call('HGET', c, m)
    if row then
      local trace = cjson.decode(row)[1]
      if trace ~= '' and redis.call('HGET', x, trace) == m then redis.call('HDEL', x, trace) end
      redis.call('HDEL', c, m)
    end
    redis.call('ZREM', a, m)
  end
end
local written = {}
for i = 4, #ARGV, 5 do
  local id, m, trace, at, row = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3]), ARGV[i + 4]
  local c, a, x = keys_of(id)
  local was = redis.call('ZSCORE', a, m)
  if not was or tonumber(was) <= at then
    redis.call('SADD', KEYS[1], id)
    redis.call('HSET', c, m, row)
    redis.call('ZADD', a, at, m)
    if trace ~= '' then
      local holder = redis.call('HGET', x, trace)
      local held = holder and redis.call('ZSCORE', a, holder)
      if not held or tonumber(held) <= at then redis.call('HSET', x, trace, m) end
    end
    written[id] = true
  end
end
for id in pairs(written) do
  local _, a = keys_of(id)
  local excess = redis.call('ZCARD', a) - max
  if excess > 0 then forget(id, redis.call('ZRANGE', a, 0, excess - 1)) end
end
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local c, a, x = keys_of(id)
  forget(id, redis.call('ZRANGEBYSCORE', a, '-inf', '(' .. cutoff))
  if redis.call('EXISTS', a) == 0 then
    redis.call('SREM', KEYS[1], id)
    redis.call('DEL', c, x)
  end
end
return 0
"""

# The content kept for each item ('' for none); a 'trace:' item: that of the trace's newest item.
# KEYS: the scorer's content hash, its trace hash; ARGV: item keys.
SHOWN = """
local out = {}
for i, item in ipairs(ARGV) do
  local m = item
  if string.sub(item, 1, 6) == 'trace:' then m = redis.call('HGET', KEYS[2], string.sub(item, 7)) end
  out[i] = (m and redis.call('HGET', KEYS[1], m)) or ''
end
return out
"""
