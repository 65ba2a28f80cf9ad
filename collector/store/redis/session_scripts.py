"""The Lua scripts of the Redis session log (`collector.store.redis.sessions`), one per
operation, each atomic. KEYS are the deployment's shared session keys; the per-session keys
(``session:{scope}``, ``turns:{scope}``) are built inside from the prefixes in ARGV, like
the trace buffer's; they share the deployment prefix's hash tag, so on a Cluster one call's
keys are in one slot. Key names: `collector.store.redis.keys`.

The scheduling rule is `collector.store.sqlite.sessions.schedule`'s: the earliest of the idle
timer, the end marker, ``max_turns``, the ``max_age`` cap and a reason that still holds; on a
tie ``ended``, then ``forced``, ``max_turns``, ``max_age``, ``idle``.
"""

from __future__ import annotations

# Forget scored sessions whose retention ran out (at most 64 per call).
# Expects KEYS[3] = sessions:scored, session prefix `sp`, turns prefix `tp`, `now`.
_FORGET = """
for _, scope in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 64)) do
  redis.call('DEL', sp .. scope, tp .. scope)
  redis.call('ZREM', KEYS[3], scope)
end
"""

# Record turns. KEYS: due, unforced, scored, counts
# ARGV: session prefix, turns prefix, now, idle_s, max_age_s, max_turns, max_revisions, max_open,
#       retain_s, then per session: scope, session_id, service, ended (1/0), arrived (its turns' latest
#       arrival, at most now), n, n x (turn key, JSON)
NOTE = """
local sp, tp, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local idle, max_age, max_turns = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local max_rev, max_open, retain = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local priority = {ended = 0, forced = 1, max_turns = 2, max_age = 3, idle = 4}
""" + _FORGET + """
local a = 10
while a <= #ARGV do
  local scope, ended, n = ARGV[a], ARGV[a + 3] == '1', tonumber(ARGV[a + 5])
  local arrived = tonumber(ARGV[a + 4])
  local skey, tkey = sp .. scope, tp .. scope
  local fresh = 0
  for i = 0, n - 1 do
    fresh = fresh + redis.call('HSET', tkey, ARGV[a + 6 + 2 * i], ARGV[a + 7 + 2 * i])
  end
  local s = redis.call('HMGET', skey, 'open', 'opened_at', 'due_at', 'reason', 'claim_until', 'scored_rev', 'last_noted')
  local opened, claim, sticky, go, join = now, nil, nil, true, true
  -- idle counts from the latest turn's arrival, whichever turn was noted first
  if s[7] and tonumber(s[7]) > arrived then arrived = tonumber(s[7]) end
  if not s[1] then
    redis.call('HSET', skey, 'session_id', ARGV[a + 1], 'service', ARGV[a + 2], 'open', '1', 'opened_at', ARGV[3],
               'scored_rev', '0', 'reason', 'idle')
  elseif s[1] == '0' then
    if fresh == 0 or tonumber(s[6]) >= max_rev then
      if fresh > 0 then redis.call('HINCRBY', KEYS[4], 'capped_total', fresh) end
      redis.call('HSET', skey, 'last_noted', tostring(arrived))
      redis.call('ZADD', KEYS[3], arrived + retain, scope)
      go = false
    else
      -- a session closed short (min_turns) was never scored: its reopening is not counted
      if tonumber(s[6]) > 0 then redis.call('HINCRBY', KEYS[4], 'reopened_total', 1) end
      redis.call('HSET', skey, 'open', '1', 'opened_at', ARGV[3])
      redis.call('ZREM', KEYS[3], scope)
    end
  elseif s[5] and tonumber(s[5]) > now then
    claim = tonumber(s[5])
    redis.call('HSET', skey, 'opened_at', ARGV[3])
  else
    opened, join = tonumber(s[2]), false  -- counted against max_open as it was
    if s[4] ~= 'idle' then sticky = {tonumber(s[3]), s[4]} end
  end
  if go then
    local count = redis.call('HLEN', tkey)
    local due, reason = arrived + idle, 'idle'
    local function consider(at, why)
      if at < due or (at == due and priority[why] < priority[reason]) then due, reason = at, why end
    end
    consider(opened + max_age, 'max_age')
    if ended then consider(now, 'ended') end
    if count >= max_turns then consider(now, 'max_turns') end
    if sticky then consider(sticky[1], sticky[2]) end
    local wake = due
    if claim and claim > wake then wake = claim end
    redis.call('HSET', skey, 'due_at', tostring(due), 'reason', reason, 'last_noted', tostring(arrived))
    redis.call('ZADD', KEYS[1], wake, scope)
    if join then redis.call('ZADD', KEYS[2], now, scope) end
  end
  a = a + 6 + 2 * n
end
local excess = redis.call('ZCARD', KEYS[2]) - max_open
if excess > 256 then excess = 256 end
if excess > 0 then
  local victims = redis.call('ZRANGE', KEYS[2], 0, excess - 1)
  for _, scope in ipairs(victims) do
    local s = redis.call('HMGET', sp .. scope, 'due_at', 'claim_until')
    local due, claim = tonumber(s[1] or ARGV[3]), tonumber(s[2] or '0')
    if due > now then  -- due now, unless it was due earlier already (an ended session stays "ended")
      redis.call('HSET', sp .. scope, 'due_at', ARGV[3], 'reason', 'forced')
      due = now
    end
    if claim > due then redis.call('ZADD', KEYS[1], claim, scope) else redis.call('ZADD', KEYS[1], due, scope) end
    redis.call('ZREM', KEYS[2], scope)
  end
  redis.call('HINCRBY', KEYS[4], 'forced_total', #victims)
end
return 1
"""

# Claim due sessions. KEYS: due, unforced, scored, counts
# ARGV: session prefix, turns prefix, now, limit, lease_s, min_turns, retain_s
# Returns {{scope, session_id, service, next revision, reason, {turn JSON...}}...}, earliest first;
# a due session with fewer than min_turns turns is closed instead (short_total), unscored.
TAKE = """
local sp, tp, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
""" + _FORGET + """
local until_ = now + tonumber(ARGV[5])
local min_turns, retain = tonumber(ARGV[6]), tonumber(ARGV[7])
local out = {}
for _, scope in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, ARGV[4])) do
  local s = redis.call('HMGET', sp .. scope, 'session_id', 'service', 'scored_rev', 'reason', 'last_noted')
  if not s[1] then
    redis.call('ZREM', KEYS[1], scope)
    redis.call('ZREM', KEYS[2], scope)
  elseif redis.call('HLEN', tp .. scope) < min_turns then
    redis.call('HINCRBY', KEYS[4], 'short_total', 1)
    redis.call('HSET', sp .. scope, 'open', '0', 'reason', 'idle')
    redis.call('HDEL', sp .. scope, 'claim_until', 'due_at')
    redis.call('ZREM', KEYS[1], scope)
    redis.call('ZREM', KEYS[2], scope)
    redis.call('ZADD', KEYS[3], tonumber(s[5] or ARGV[3]) + retain, scope)
  else
    redis.call('HSET', sp .. scope, 'claim_until', tostring(until_))
    redis.call('ZADD', KEYS[1], until_, scope)
    out[#out + 1] = {scope, s[1], s[2], tostring(tonumber(s[3]) + 1), s[4], redis.call('HVALS', tp .. scope)}
  end
end
return out
"""

# Mark claimed sessions scored. KEYS: due, unforced, scored, counts
# ARGV: session prefix, turns prefix, now, retain_s, max_revisions,
#       then per session: scope, revision, n, n x turn key (the turns it was scored with)
SCORED = """
local sp, tp, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local retain, max_rev = tonumber(ARGV[4]), tonumber(ARGV[5])
local a = 6
while a <= #ARGV do
  local scope, rev, n = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local skey = sp .. scope
  local s = redis.call('HMGET', skey, 'open', 'scored_rev', 'last_noted', 'due_at', 'reason')
  if s[1] == '1' and tonumber(s[2]) < rev then
    local scored = {}
    for i = 1, n do scored[ARGV[a + 2 + i]] = true end
    local later = 0
    for _, key in ipairs(redis.call('HKEYS', tp .. scope)) do
      if not scored[key] then later = later + 1 end
    end
    redis.call('HINCRBY', KEYS[4], 'scored_total', 1)
    if later > 0 and rev < max_rev then
      redis.call('HINCRBY', KEYS[4], 'reopened_total', 1)
      redis.call('HSET', skey, 'scored_rev', rev, 'opened_at', ARGV[3])
      redis.call('HDEL', skey, 'claim_until')
      redis.call('ZADD', KEYS[1], s[4], scope)
      redis.call('ZADD', KEYS[2], 'XX', now, scope)
    else
      if later > 0 then redis.call('HINCRBY', KEYS[4], 'capped_total', later) end
      redis.call('HSET', skey, 'open', '0', 'scored_rev', rev, 'reason', 'idle')
      redis.call('HDEL', skey, 'claim_until', 'due_at')
      redis.call('ZREM', KEYS[1], scope)
      redis.call('ZREM', KEYS[2], scope)
      redis.call('ZADD', KEYS[3], tonumber(s[3]) + retain, scope)
    end
  end
  a = a + 3 + n
end
return 1
"""
