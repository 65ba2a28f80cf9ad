"""The Lua scripts of the Redis backend's queue and trace buffer (run with ``register_script``:
EVALSHA, loaded again after a Redis restart; the outboxes' are in `outbox_scripts`). Each
runs atomically; comments list their KEYS and ARGV.

Some compute per-trace key names from the prefix they are given; on a Cluster those share
the hash tag of the deployment's prefix, hence the slot of the declared keys
(`collector.store.redis.keys`).
"""

from __future__ import annotations

from collector.store.redis.totals import TOTALS

# Lua helper prepended to the scripts that write many fields or members in one call:
# redis.call(fixed..., values[i..j]) over slices of `step` values (Lua's unpack takes a few
# thousand values at most; a slice of pairs keeps them whole when `step` is even).
SLICES = """
local function call_slices(fixed, values, step)
  for i = 1, #values, step do
    local args = {unpack(fixed)}
    for k = i, math.min(i + step - 1, #values) do args[#args + 1] = values[k] end
    redis.call(unpack(args))
  end
end
"""

# ------------------------------ queue

# Queue jobs whose idempotency key is new. KEYS: jobs; ARGV: idem prefix, ttl ms, then
# (job key, job JSON) per job. Returns 1 (queued) or 0 (duplicate) per job.
PUT = """
local out = {}
for i = 3, #ARGV, 2 do
  if redis.call('SET', ARGV[1] .. ARGV[i], 'queued', 'NX', 'PX', ARGV[2]) then
    redis.call('XADD', KEYS[1], '*', 'key', ARGV[i], 'job', ARGV[i + 1], 'attempts', '0')
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
"""

# Re-queue delayed jobs that are due ("attempts|job", or a parked job's "attempts,parked_since|job").
# KEYS: delayed, delayed data, jobs; ARGV: now, limit.
PROMOTE = """
local keys = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, key in ipairs(keys) do
  local data = redis.call('HGET', KEYS[2], key)
  redis.call('ZREM', KEYS[1], key)
  redis.call('HDEL', KEYS[2], key)
  if data then
    local sep = string.find(data, '|', 1, true)
    local head = string.sub(data, 1, sep - 1)
    local comma = string.find(head, ',', 1, true)
    if comma then
      redis.call('XADD', KEYS[3], '*', 'key', key, 'job', string.sub(data, sep + 1),
                 'attempts', string.sub(head, 1, comma - 1), 'parked_since', string.sub(head, comma + 1))
    else
      redis.call('XADD', KEYS[3], '*', 'key', key, 'job', string.sub(data, sep + 1), 'attempts', head)
    end
  end
end
return #keys
"""

# Take over entries idle past the visibility timeout; dead-letter those delivered too often (each
# counted "failed" for its scorer in the totals).
# KEYS: jobs, dead, parked, totals; ARGV: group, consumer, min idle ms, count, max attempts, idem prefix,
# now, error JSON, ttl ms. Returns {{entry id, key, job, attempts, deliveries, parked_since or ''}...},
# dead count.
RECLAIM = """
local res = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], '0-0', 'COUNT', ARGV[4])
local out = {}
local dead = 0
for _, e in ipairs(res[2]) do
  local id, f = e[1], e[2]
  local fields = {}
  for i = 1, #f, 2 do fields[f[i]] = f[i + 1] end
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1)
  local deliveries = tonumber(p[1][4])
  local attempts = tonumber(fields['attempts'] or '0') + deliveries
  if attempts > tonumber(ARGV[5]) then
    redis.call('XADD', KEYS[2], '*', 'key', fields['key'], 'job', fields['job'], 'error', ARGV[8],
               'attempts', attempts, 'failed_at', ARGV[7])
    redis.call('SET', ARGV[6] .. fields['key'], 'dead', 'PX', ARGV[9])
    redis.call('HDEL', KEYS[3], fields['key'])
    local ok, job = pcall(cjson.decode, fields['job'])
    local scorer = (ok and type(job) == 'table' and job['scorer_id']) or '?'
    redis.call('HINCRBYFLOAT', KEYS[4], 'scorer\\31' .. scorer .. '\\31failed', 1)
    redis.call('XACK', KEYS[1], ARGV[1], id)
    redis.call('XDEL', KEYS[1], id)
    dead = dead + 1
  else
    out[#out + 1] = {id, fields['key'], fields['job'], tostring(attempts), tostring(deliveries),
                     fields['parked_since'] or ''}
  end
end
return {out, dead}
"""

# Settle a leased job if the lease still holds: outbox write + idempotency mark + XACK/XDEL;
# a job done or dead forgets its judge replies (it never runs again). A retry or a park goes to
# the delayed set (a park with its parked_since, and into the parked hash with its reason);
# any other settlement takes the job out of the parked hash. The tally goes to the totals when
# the settlement counts (a retry or park whose lease holds; a dead job not done already).
# KEYS: jobs, dead, delayed, delayed_data, outbox, outbox_data, outbox_seq, idem, replies, parked,
#       totals, then (sink zset, sink data) per native sink: the record is queued there too, same id
# ARGV: group, entry id, consumer, deliveries, kind (retry, park, done, dead), now, ttl_ms,
#       record, key, job, attempts, error, due_at, parked_since, park reason, tally JSON
SETTLE = TOTALS + """
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[3] or tostring(p[1][4]) ~= ARGV[4] then return -1 end
local added = 0
local counted = {}
if ARGV[5] == 'park' then
  redis.call('HSET', KEYS[10], ARGV[9], ARGV[15])
else
  redis.call('HDEL', KEYS[10], ARGV[9])
end
if ARGV[5] == 'retry' or ARGV[5] == 'park' then
  local head = ARGV[11]
  if ARGV[5] == 'park' then head = head .. ',' .. ARGV[14] end
  redis.call('ZADD', KEYS[3], ARGV[13], ARGV[9])
  redis.call('HSET', KEYS[4], ARGV[9], head .. '|' .. ARGV[10])
  tally_into(counted, ARGV[16])
else
  local state = redis.call('GET', KEYS[8])
  if state ~= 'done' and state ~= 'dead' then
    tally_into(counted, ARGV[16])
    if ARGV[5] == 'dead' then
      redis.call('XADD', KEYS[2], '*', 'key', ARGV[9], 'job', ARGV[10], 'error', ARGV[12],
                 'attempts', ARGV[11], 'failed_at', ARGV[6])
    end
    redis.call('SET', KEYS[8], ARGV[5], 'PX', ARGV[7])
    if ARGV[8] ~= '' then
      local id = redis.call('INCR', KEYS[7])
      redis.call('HSET', KEYS[6], id, ARGV[8])
      redis.call('ZADD', KEYS[5], ARGV[6], id)
      for i = 12, #KEYS, 2 do
        redis.call('HSET', KEYS[i + 1], id, ARGV[8])
        redis.call('ZADD', KEYS[i], ARGV[6], id)
      end
      added = 1
    end
  end
  redis.call('DEL', KEYS[9])
end
add_totals(KEYS[11], counted)
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
return added
"""

# Settle many leased jobs done at once (SETTLE's "done" case, one call for a worker's batch):
# each job's lease and idempotency key are checked in turn, then the new records, the acks, the
# cleanups and the totals (the tallies of the jobs not done already, summed) are written with
# one command each for the whole batch (records get outbox ids in the jobs' order, as one INCR
# per record would give them).
# KEYS: jobs, outbox, outbox_data, outbox_seq, parked, totals, then (sink zset, sink data) per
#       native sink, then (idem, replies) per job
# ARGV: group, consumer, now, ttl_ms, number of sink keys, then (entry id, deliveries, record,
#       job key, tally JSON) per job. Returns per job: -1 (the lease was lost), 1 (a record queued) or 0.
SETTLE_DONE = SLICES + TOTALS + """
local last_sink = 6 + tonumber(ARGV[5])
local out, records, held, unpark, forget, counted = {}, {}, {}, {}, {}, {}
local j = 0
for a = 6, #ARGV, 5 do
  local id, record = ARGV[a], ARGV[a + 2]
  local idem, replies = KEYS[last_sink + 1 + 2 * j], KEYS[last_sink + 2 + 2 * j]
  j = j + 1
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1)
  if #p == 0 or p[1][2] ~= ARGV[2] or tostring(p[1][4]) ~= ARGV[a + 1] then
    out[j] = -1
  else
    out[j] = 0
    local state = redis.call('GET', idem)
    if state ~= 'done' and state ~= 'dead' then
      redis.call('SET', idem, 'done', 'PX', ARGV[4])
      tally_into(counted, ARGV[a + 4])
      if record ~= '' then
        records[#records + 1] = record
        out[j] = 1
      end
    end
    held[#held + 1] = id
    unpark[#unpark + 1] = ARGV[a + 3]
    forget[#forget + 1] = replies
  end
end
if #records > 0 then
  local first = redis.call('INCRBY', KEYS[4], #records) - #records
  local data, scored = {}, {}
  for i, record in ipairs(records) do
    data[2 * i - 1], data[2 * i] = first + i, record
    scored[2 * i - 1], scored[2 * i] = ARGV[3], first + i
  end
  call_slices({'HSET', KEYS[3]}, data, 1000)
  call_slices({'ZADD', KEYS[2]}, scored, 1000)
  for i = 7, last_sink, 2 do
    call_slices({'HSET', KEYS[i + 1]}, data, 1000)
    call_slices({'ZADD', KEYS[i]}, scored, 1000)
  end
end
if #held > 0 then
  call_slices({'HDEL', KEYS[5]}, unpark, 1000)
  call_slices({'DEL'}, forget, 1000)
  call_slices({'XACK', KEYS[1], ARGV[1]}, held, 1000)
  call_slices({'XDEL', KEYS[1]}, held, 1000)
end
add_totals(KEYS[6], counted)
return out
"""

# Renew leases (a worker's heartbeat): reset the idle time of entries still pending for
# this consumer with this delivery count (XCLAIM JUSTID leaves the delivery count alone).
# KEYS: jobs; ARGV: group, consumer, then (entry id, deliveries) per job. Returns how many held.
RENEW = """
local held = 0
for i = 3, #ARGV, 2 do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if #p == 1 and p[1][2] == ARGV[2] and tostring(p[1][4]) == ARGV[i + 1] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
    held = held + 1
  end
end
return held
"""

# Remove idle consumers holding no job. KEYS: jobs; ARGV: group, idle ms, own consumer name. Atomic: a consumer that takes a job
# between the check and the delete cannot exist (deleting one with pending jobs would lose them).
PRUNE_CONSUMERS = """
local removed = 0
for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local f = {}
  for i = 1, #c, 2 do f[c[i]] = c[i + 1] end
  if f['pending'] == 0 and f['idle'] >= tonumber(ARGV[2]) and f['name'] ~= ARGV[3] then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], f['name'])
    removed = removed + 1
  end
end
return removed
"""

# ------------------------------ buffer

# Store chunks and move decision times. KEYS: open, decided, decide, then (meta, chunks) per chunk
# ARGV: now, decision_wait, rootless_wait, max_traces, max_spans, max_age, prefix, ttl_ms,
#       then (trace hex, span count, candidate, root, data) per chunk
APPEND = """
local now, wait, rootless = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local max_traces, max_spans, max_age = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local prefix, ttl = ARGV[7], ARGV[8]
local evicted, dropped = 0, 0
local held = nil  -- traces in open + decided: counted once per call, then kept up to date here
for i = 0, (#KEYS - 3) / 2 - 1 do
  local meta, chunks = KEYS[4 + 2 * i], KEYS[5 + 2 * i]
  local a = 9 + 5 * i
  local tid, n = ARGV[a], tonumber(ARGV[a + 1])
  local cand, root = ARGV[a + 2] == '1', ARGV[a + 3] == '1'
  local m = redis.call('HMGET', meta, 'first_seen', 'spans', 'candidate', 'root', 'decide_at')
  local keep = true
  local fields = {}
  if not m[1] then
    -- Full: decided traces go first (oldest decision), then the newest trace without a run
    -- span; a newcomer without one (or, failing a victim, any newcomer) is itself the one.
    held = held or redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[2])
    while keep and held >= max_traces do
      local old = redis.call('ZPOPMIN', KEYS[2])
      local victim = old[1]
      if victim then held = held - 1 end
      if not victim and cand then
        for _, t in ipairs(redis.call('ZREVRANGE', KEYS[1], 0, 63)) do
          if redis.call('HGET', prefix .. 'meta:' .. t, 'candidate') ~= '1' then victim = t; break end
        end
        if victim then held = held - redis.call('ZREM', KEYS[1], victim); evicted = evicted + 1 end
      end
      if victim then
        redis.call('DEL', prefix .. 'meta:' .. victim, prefix .. 'chunks:' .. victim)
        redis.call('ZREM', KEYS[3], victim)
      else
        keep = false
        evicted = evicted + 1
      end
    end
    -- the meta fields are gathered in `fields` and written by one HSET below
    if keep then
      fields = {'first_seen', ARGV[1], 'spans', 0, 'candidate', 0, 'root', 0}
      held = held + redis.call('ZADD', KEYS[1], ARGV[1], tid)
      m = {ARGV[1], '0', '0', '0', false}
    end
  end
  local spans = tonumber(m[2] or '0')
  if not keep then
    -- evicted on arrival (counted above)
  elseif spans + n > max_spans and not (cand and spans + n <= 2 * max_spans) then
    dropped = dropped + n
  else
    redis.call('RPUSH', chunks, ARGV[a + 4])
    local has_cand = m[3] == '1' or cand
    local root_seen = m[4] == '1' or root
    local decide_at = nil
    if root and has_cand then
      decide_at = now + wait
    elseif cand then
      decide_at = now + rootless
      if root_seen then decide_at = now + wait end
      if m[5] and tonumber(m[5]) > decide_at then decide_at = tonumber(m[5]) end
    end
    if decide_at then
      local cap = tonumber(m[1]) + max_age
      if decide_at > cap then decide_at = cap end
      redis.call('ZADD', KEYS[3], decide_at, tid)
      fields[#fields + 1] = 'decide_at'
      fields[#fields + 1] = tostring(decide_at)
    end
    -- later pairs win within one HSET: these replace a new trace's zeros
    fields[#fields + 1] = 'spans'
    fields[#fields + 1] = spans + n
    fields[#fields + 1] = 'candidate'
    fields[#fields + 1] = has_cand and '1' or '0'
    fields[#fields + 1] = 'root'
    fields[#fields + 1] = root_seen and '1' or '0'
  end
  if #fields > 0 then redis.call('HSET', meta, unpack(fields)) end
  redis.call('PEXPIRE', meta, ttl)
  redis.call('PEXPIRE', chunks, ttl)
end
return {evicted, dropped}
"""

# Age out old traces and claim due ones.
# KEYS: open, decided, decide; ARGV: now, limit, claim until, max_age, prefix
DUE = """
local now, cutoff, prefix = tonumber(ARGV[1]), tonumber(ARGV[1]) - tonumber(ARGV[4]), ARGV[5]
local expired = 0
for z = 1, 2 do
  for _, tid in ipairs(redis.call('ZRANGEBYSCORE', KEYS[z], '-inf', cutoff, 'LIMIT', 0, 256)) do
    if not redis.call('ZSCORE', KEYS[3], tid) then
      local meta = prefix .. 'meta:' .. tid
      if z == 1 and redis.call('HGET', meta, 'candidate') ~= '1' then expired = expired + 1 end
      redis.call('DEL', meta, prefix .. 'chunks:' .. tid)
      redis.call('ZREM', KEYS[z], tid)
    end
  end
end
local due = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, ARGV[2])
for _, tid in ipairs(due) do
  redis.call('ZADD', KEYS[3], ARGV[3], tid)
  redis.call('HSET', prefix .. 'meta:' .. tid, 'claim', ARGV[3])
end
return {due, expired}
"""

# Every chunk of several traces, in arrival order (one reply, parsed in C, instead of a
# pipeline of one LRANGE per trace). KEYS: each trace's chunk list. Returns one list per key.
LOAD_MANY = """
local out = {}
for i = 1, #KEYS do out[i] = redis.call('LRANGE', KEYS[i], 0, -1) end
return out
"""

# Mark traces decided; clear each one's timer only if it still holds this claim. Each trace's
# meta is read and cleared in turn; the sorted-set moves are one command each for the batch.
# KEYS: open, decided, decide, then the meta hash of each trace; ARGV: each trace's hex id
FINISH = SLICES + """
local unclocked, moved, firsts = {}, {}, {}
for i = 1, #ARGV do
  local tid, meta = ARGV[i], KEYS[3 + i]
  local claim = redis.call('HGET', meta, 'claim')
  local score = redis.call('ZSCORE', KEYS[3], tid)
  if not score or not claim or tonumber(score) == tonumber(claim) then
    unclocked[#unclocked + 1] = tid
    redis.call('HDEL', meta, 'decide_at', 'claim')
  else
    redis.call('HDEL', meta, 'claim')
  end
  local first = redis.call('ZSCORE', KEYS[1], tid)
  if first then
    moved[#moved + 1] = tid
    firsts[#firsts + 1] = first
    firsts[#firsts + 1] = tid
  end
end
call_slices({'ZREM', KEYS[3]}, unclocked, 1000)
call_slices({'ZREM', KEYS[1]}, moved, 1000)
call_slices({'ZADD', KEYS[2]}, firsts, 1000)
return #ARGV
"""
