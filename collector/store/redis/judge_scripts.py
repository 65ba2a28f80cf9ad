"""The Lua scripts of the Redis judge ledger (`collector.store.redis.judge_ledger`). Each runs
atomically and touches only the keys it is given (all of one deployment's prefix, built by
`collector.store.redis.keys.RedisKeys`); comments list their KEYS and ARGV.

Amounts and times travel as decimal strings (Python's ``repr``) and are stored with
``%.17g``, so a float is stored exactly. Rates use the server's clock (``TIME``): every
replica asks one clock.
"""

from __future__ import annotations

# ------------------------------ budgets

# Forget the window's expired reservations; if every scope's spent + reserved + amount stays
# within its limit (+ tolerance), reserve the amount under the reservation id.
# A scope's limit set over the configured one given ("usd,configured" in the limits hash) replaces it.
# KEYS: spend, reservations, reservation data, limits; ARGV: reservation, amount, now, expires at,
# retention ms, tolerance, data JSON ([amount, scope...]), then (scope, configured limit) pairs.
# Returns nil (reserved) or the first scope the amount would cross.
RESERVE = """
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[3])) do
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
end
local reserved = {}
local live = redis.call('HGETALL', KEYS[3])
for i = 2, #live, 2 do
  local r = cjson.decode(live[i])
  for s = 2, #r do reserved[r[s]] = (reserved[r[s]] or 0) + r[1] end
end
local amount, tolerance = tonumber(ARGV[2]), tonumber(ARGV[6])
for i = 8, #ARGV, 2 do
  local limit = tonumber(ARGV[i + 1])
  local set = redis.call('HGET', KEYS[4], ARGV[i])
  if set then
    local usd, configured = string.match(set, '^([^,]+),(.+)$')
    if tonumber(configured) == limit then limit = tonumber(usd) end
  end
  local spent = tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '0')
  if spent + (reserved[ARGV[i]] or 0) + amount > limit + tolerance then return ARGV[i] end
end
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[7])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
redis.call('PEXPIRE', KEYS[3], ARGV[5])
return false
"""

# Drop a reservation (if still there) and add the actual amount to each scope's spend.
# KEYS: spend, reservations, reservation data; ARGV: reservation, actual, retention ms, scopes...
SETTLE_SPEND = """
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
local actual, seen = tonumber(ARGV[2]), {}
for i = 4, #ARGV do
  if not seen[ARGV[i]] then
    seen[ARGV[i]] = true
    local spent = tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '0')
    redis.call('HSET', KEYS[1], ARGV[i], string.format('%.17g', spent + actual))
  end
end
if #ARGV >= 4 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return 0
"""

# Make the jobs parked for a reason and waiting in the delayed set due now (they are promoted
# to the stream at the next take). KEYS: parked, delayed; ARGV: reason, now. Returns how many.
WAKE_PARKED = """
local woken = 0
local parked = redis.call('HGETALL', KEYS[1])
for i = 1, #parked, 2 do
  if parked[i + 1] == ARGV[1] then
    local due = redis.call('ZSCORE', KEYS[2], parked[i])
    if due and tonumber(due) > tonumber(ARGV[2]) then
      redis.call('ZADD', KEYS[2], 'XX', ARGV[2], parked[i])
      woken = woken + 1
    end
  end
end
return woken
"""

# ------------------------------ rates (one hash per model: rpm, tpm, cool)

# The server's time, and `keep()`: expire the model's hash a second after the last time in it
# (an arrival time or a cool-down) has passed: by then it says nothing a missing hash doesn't.
_CLOCK = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local function keep()
  local last = now
  for _, v in ipairs(redis.call('HMGET', KEYS[1], 'rpm', 'tpm', 'cool')) do
    if v and tonumber(v) > last then last = tonumber(v) end
  end
  redis.call('PEXPIRE', KEYS[1], math.ceil((last - now) * 1000) + 1000)
end
"""

# Take one request and a number of tokens from the model's GCRA limits (a limit of 0: none;
# requests evenly spaced, tokens in bursts of one second's worth, at least this request's),
# unless a limit or a cool-down says wait.
# KEYS: rate; ARGV: rpm, tpm, tokens. Returns "0" (taken) or the seconds to wait (nothing taken).
RATE_TAKE = _CLOCK + """
local h = redis.call('HMGET', KEYS[1], 'rpm', 'tpm', 'cool')
local wait = (tonumber(h[3]) or now) - now
local fields = {}
local function step(name, tat, per_minute, cost, burst)
  if per_minute <= 0 then return end
  local rate = per_minute / 60
  local new = math.max(tonumber(tat) or now, now) + cost / rate
  local allowed = cost / rate
  if burst then allowed = math.max(rate, cost) / rate end
  local over = new - now - allowed
  if over > 1e-9 and over > wait then wait = over end
  fields[#fields + 1] = name
  fields[#fields + 1] = string.format('%.17g', new)
end
step('rpm', h[1], tonumber(ARGV[1]), 1, false)
step('tpm', h[2], tonumber(ARGV[2]), tonumber(ARGV[3]), true)
if wait > 0 then return string.format('%.17g', wait) end
if #fields > 0 then redis.call('HSET', KEYS[1], unpack(fields)) end
redis.call('HDEL', KEYS[1], 'cool')
keep()
return '0'
"""

# Charge tokens to the model's tokens-per-minute limit without waiting.
# KEYS: rate; ARGV: tpm, tokens.
RATE_ADD = _CLOCK + """
local tpm, tokens = tonumber(ARGV[1]), tonumber(ARGV[2])
if tpm <= 0 or tokens <= 0 then return 0 end
local tat = tonumber(redis.call('HGET', KEYS[1], 'tpm')) or now
redis.call('HSET', KEYS[1], 'tpm', string.format('%.17g', math.max(tat, now) + tokens * 60 / tpm))
keep()
return 1
"""

# No request to the model until now + seconds, unless a longer cool-down is set.
# KEYS: rate; ARGV: seconds.
COOL_DOWN = _CLOCK + """
local cool = now + tonumber(ARGV[1])
local set = tonumber(redis.call('HGET', KEYS[1], 'cool'))
if not set or cool > set then redis.call('HSET', KEYS[1], 'cool', string.format('%.17g', cool)) end
keep()
return 1
"""

# ------------------------------ breakers

# Claim an open breaker's due probe: push its next probe on. KEYS: probes; ARGV: key, now, next
# probe. Returns 1 (claimed) or 0 (not open, or not due).
CLAIM_PROBE = """
local due = redis.call('HGET', KEYS[1], ARGV[1])
if due and tonumber(due) <= tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  return 1
end
return 0
"""

# Close the breakers matching every filter given. KEYS: breakers, probes; ARGV: model, key,
# whether to match the model ('1'), whether to match the key ('1'). Returns how many closed.
CLOSE_BREAKERS = """
local closed = 0
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local key = all[i]
  if (ARGV[3] ~= '1' or cjson.decode(all[i + 1])['model'] == ARGV[1]) and (ARGV[4] ~= '1' or key == ARGV[2]) then
    redis.call('HDEL', KEYS[1], key)
    redis.call('HDEL', KEYS[2], key)
    closed = closed + 1
  end
end
return closed
"""
