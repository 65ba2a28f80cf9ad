"""Dead letters of the Redis store (the ``P dead`` stream), read and acted on from any host.

A replay runs one script per call: for each entry it sets the job's idempotency key back
to "queued" (it was "dead", which makes the settle script drop a result), adds the job to
the job stream with its attempts reset, and deletes the dead letter: the workers of the
deployment take it like any new job and score it once. The job queued is the letter's,
naming the failure span its new outcome replaces (`collector.common.types.DeadLetter.replayed_job`);
an entry deleted meanwhile (by another replay or a purge) is skipped. A purge deletes entries; their
keys stay "dead" until their TTL (``queue.retention_s``), so the runs are not queued again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis

from collector.common.types import DeadLetter
from collector.store.redis.job_json import job_json, parse_job
from collector.store.redis.keys import RedisKeys

# KEYS: dead, jobs; ARGV: idem prefix, ttl ms, then (entry id, job JSON to queue) per letter.
# Returns the ids replayed.
REPLAY = """
local out = {}
for i = 3, #ARGV, 2 do
  local entry = redis.call('XRANGE', KEYS[1], ARGV[i], ARGV[i])
  if #entry == 1 then
    local f = entry[1][2]
    local fields = {}
    for j = 1, #f, 2 do fields[f[j]] = f[j + 1] end
    redis.call('SET', ARGV[1] .. fields['key'], 'queued', 'PX', ARGV[2])
    redis.call('XADD', KEYS[2], '*', 'key', fields['key'], 'job', ARGV[i + 1], 'attempts', '0')
    redis.call('XDEL', KEYS[1], ARGV[i])
    out[#out + 1] = ARGV[i]
  end
end
return out
"""


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _letter(entry_id: Any, f: Any) -> DeadLetter:
    """A ``dead`` stream entry as a `DeadLetter`."""
    job = parse_job(f[b"job"])
    failed_at = float(f.get(b"failed_at", b"0") or 0)
    return DeadLetter.from_stored(_s(entry_id), _s(f[b"key"]), job.run, f[b"error"], int(f[b"attempts"]), failed_at)


class RedisDeadLetters:
    """`DeadLetterAdmin` on a deployment's Redis keys (see the module docstring).

    Args:
        client: an asyncio Redis client (closed by `close`).
        keys: the deployment's keys (``queue.key_prefix``).
        idempotency_ttl_s: the TTL of a replayed job's key (``queue.retention_s``).
    """

    def __init__(self, client: aioredis.Redis, keys: RedisKeys, *, idempotency_ttl_s: float) -> None:
        self._r = client
        self._k = keys
        self._ttl_ms = int(idempotency_ttl_s * 1000)
        self._replay = client.register_script(REPLAY)

    async def letters(self) -> list[DeadLetter]:
        """Every dead letter, oldest first."""
        rows: Any = await self._r.xrange(self._k.dead)
        return [_letter(entry_id, fields) for entry_id, fields in rows]

    async def _named(self, ids: Sequence[str]) -> list[DeadLetter]:
        """The dead letters of these ids that exist (an id that is not a stream id names none)."""
        found: list[DeadLetter] = []
        for letter_id in dict.fromkeys(ids):
            try:
                rows: Any = await self._r.xrange(self._k.dead, letter_id, letter_id)
            except aioredis.ResponseError:  # "Invalid stream ID"
                continue
            found.extend(_letter(entry_id, fields) for entry_id, fields in rows)
        return found

    async def replay(self, ids: Sequence[str] | None) -> list[str]:
        """Re-queue dead letters (all when ``ids`` is None); returns the ids replayed."""
        letters = await (self.letters() if ids is None else self._named(ids))
        if not letters:
            return []
        pairs = [value for x in letters for value in (x.id, job_json(x.replayed_job()))]
        done: Any = await self._replay(keys=[self._k.dead, self._k.jobs],
                                       args=[self._k.idem_prefix, self._ttl_ms, *pairs])
        return [_s(i) for i in done]

    async def purge(self, ids: Sequence[str] | None) -> int:
        """Delete dead letters (all when ``ids`` is None); returns how many."""
        if ids is None:
            count = int(await self._r.xlen(self._k.dead))
            await self._r.delete(self._k.dead)
            return count
        return int(await self._r.xdel(self._k.dead, *ids)) if ids else 0

    async def close(self) -> None:
        """Close the client."""
        await self._r.aclose()

