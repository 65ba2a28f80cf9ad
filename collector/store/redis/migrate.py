"""Moving a deployment's keys from the untagged names of earlier versions to the hash-tagged ones.

Before Cluster support, keys were ``tracescore:jobs``, ``tracescore:idem:<job key>``...;
now they are ``{tracescore}:jobs``... (`collector.store.redis.keys`). A daemon that starts
on a server holding keys under the old names renames them (``RENAMENX``: type, TTL,
consumer groups and pending entries move with each key; a key already present under the
new name is left alone and logged), once, under a lock key, before it touches the queue;
other replicas starting at the same time wait for the lock. Queued jobs, buffered traces,
unexported scores, dead letters and idempotency keys are therefore kept across the
upgrade. Only the names this backend writes are matched (``P jobs``, ``P idem:*``...), so a
deployment whose prefix extends this one (``tracescore:eu:``) is not touched, unless its
names collide with ours.

Stop the old version's processes before starting the new one: an old receiver still
writing ``tracescore:*`` after the rename would write to keys nobody reads. A Cluster
never held the old names (its scripts failed with CROSSSLOT), so nothing is done there.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

import redis.asyncio as aioredis

from collector.store.redis.conn import is_cluster
from collector.store.redis.keys import RedisKeys

logger = logging.getLogger(__name__)

FIXED = ("jobs", "delayed", "delayed:data", "dead", "outbox", "outbox:data", "outbox:attempts", "outbox:seq",
         "traces:open", "traces:decided", "decide", "forward", "forward:seq", "forward:sent", "forward:bytes",
         "forward:leader", "sessions:due", "sessions:unforced", "sessions:scored", "sessions:counts", "status")
"""Single keys of a deployment (after the prefix)."""

FAMILIES = ("idem:", "replies:", "meta:", "chunks:", "sink:", "session:", "turns:", "status:")
"""Key families of a deployment (the prefix, one of these, then an id)."""


async def migrate_untagged(client: aioredis.Redis, keys: RedisKeys, *, lock_s: float = 120.0) -> int:
    """Rename the deployment's keys from ``keys.configured`` to ``keys.prefix``; returns how many.

    Nothing to do (0) when the configured prefix is already tagged, on a Cluster, or when
    no key under the old names exists (one ``EXISTS``: the common case, every start after).

    Example:
        >>> async def demo():
        ...     client = aioredis.Redis()
        ...     keys = RedisKeys(f"doctest-{uuid.uuid4().hex}:")
        ...     await client.xadd(keys.configured + "jobs", {"key": "k"})
        ...     await client.set(keys.configured + "idem:t/s/q/1", "queued", px=60_000)
        ...     moved = await migrate_untagged(client, keys)
        ...     found = [await client.type(k) for k in (keys.jobs, keys.idem("t/s/q/1"), keys.configured + "jobs")]
        ...     await client.delete(keys.jobs, keys.idem("t/s/q/1"))
        ...     await client.aclose()
        ...     return moved, found
        >>> asyncio.run(demo())
        (2, [b'stream', b'string', b'none'])
    """
    old = keys.configured
    if old == keys.prefix or is_cluster(client):
        return 0
    if not await client.exists(*(old + name for name in FIXED)):
        return 0
    lock = keys.prefix + "migrating"
    owner = uuid.uuid4().hex
    deadline = time.monotonic() + lock_s
    while not await client.set(lock, owner, nx=True, px=int(lock_s * 1000)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"another process holds {lock} for longer than {lock_s:g}s")
        await asyncio.sleep(0.2)  # another replica migrates: its renames are done when the lock goes
    try:
        moved = 0
        names = [old + name for name in FIXED]
        for family in FAMILIES:
            names += [key.decode() async for key in client.scan_iter(match=_glob(old + family) + "*", count=1000)]
        for name in dict.fromkeys(names):
            new = keys.prefix + name[len(old):]
            try:
                renamed = await client.renamenx(name, new)
            except aioredis.ResponseError:  # "no such key": gone since (expired, or another replica)
                continue
            if renamed:
                moved += 1
            else:
                logger.warning("kept %s: %s exists already (not overwritten)", name, new)
        if moved:
            logger.warning("renamed %d Redis keys from %s* to %s* (hash-tagged names, SPEC §9)", moved, old, keys.prefix)
        return moved
    finally:
        if await client.get(lock) == owner.encode():
            await client.delete(lock)


def _glob(text: str) -> str:
    r"""``text`` with SCAN's glob characters escaped.

    Example:
        >>> _glob("a*b[c]?")
        'a\\*b\\[c\\]\\?'
    """
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)
