"""The Lua scripts of the Redis outboxes (the score outbox and each native sink's): claim due
records, delete exported ones, postpone failed ones. Run with ``register_script`` (EVALSHA);
comments list their KEYS and ARGV.
"""

from __future__ import annotations

from collector.store.redis.scripts import SLICES

# Claim due outbox records: one HMGET for their data and one for their attempts, then one ZADD
# moving the claimed ones to the claim's end and one ZREM for ids whose data is gone (a
# record released meanwhile). KEYS: outbox, outbox data, outbox attempts; ARGV: now, limit,
# claim until. Returns {id, data, attempts} per claimed record, in due order.
CLAIM = SLICES + """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
local data, attempts = {}, {}
for i = 1, #ids, 1000 do
  local last = math.min(i + 999, #ids)
  local got = redis.call('HMGET', KEYS[2], unpack(ids, i, last))
  local tried = redis.call('HMGET', KEYS[3], unpack(ids, i, last))
  for k = 1, last - i + 1 do
    data[i + k - 1], attempts[i + k - 1] = got[k], tried[k]
  end
end
local out, claimed, gone = {}, {}, {}
for i, id in ipairs(ids) do
  if data[i] then
    claimed[#claimed + 1] = ARGV[3]
    claimed[#claimed + 1] = id
    out[#out + 1] = {id, data[i], attempts[i] or '0'}
  else
    gone[#gone + 1] = id
  end
end
call_slices({'ZADD', KEYS[1]}, claimed, 1000)
call_slices({'ZREM', KEYS[1]}, gone, 1000)
return out
"""

# Delete exported records. KEYS: outbox, outbox data, outbox attempts; ARGV: ids...
RELEASE = """
redis.call('ZREM', KEYS[1], unpack(ARGV))
redis.call('HDEL', KEYS[2], unpack(ARGV))
redis.call('HDEL', KEYS[3], unpack(ARGV))
return #ARGV
"""

# Postpone records still in the outbox. KEYS: outbox, outbox attempts; ARGV: until, ids...
DEFER = """
for i = 2, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], ARGV[1], ARGV[i])
    redis.call('HINCRBY', KEYS[2], ARGV[i], 1)
  end
end
return 1
"""
