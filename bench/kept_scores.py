"""Kept scores (SPEC §11): bytes per kept score, and how fast they are kept and scanned.

For each store (``--store sqlite``, ``--store redis``; default both), in this process: N
scores (``--scores``) of S scorers (``--scorers``), each on its own run (random trace and span
ids, a pass/fail label, one version and judge revision per scorer, times a millisecond
apart), kept through the real store's ``keep_scores`` in batches of B (``--batch``, as a
worker keeps the scores of a settled batch) by one caller, with ``max_per_scorer`` and
``retain_s`` high enough to keep them all (``max_per_scorer``: N / S unless
``--max-per-scorer`` says otherwise, so each scorer ends at its bound, as in a steady state); then every score read back with
``scan_kept_scores`` (batches of 10,000, checked complete and oldest first).

* **bytes per kept score**: on SQLite the growth of the database file (the store closed, so
  its WAL is checkpointed into it) / N; on Redis the ``MEMORY USAGE`` (``SAMPLES 0``: exact)
  of every key the scores left / N. On Redis the same scores are also written in the layout
  of one hash of ``KeptScore.to_row()`` JSON plus a sorted set of the same fields by time per
  scorer, the plain layout `collector.store.kept_rows` replaces, and measured the same way.
* **keep**: scores/s and ms per ``keep_scores`` call (p50, p99);
* **scan**: scores/s read back;
* on Redis, the server's time in scripts per score, keep and scan (``INFO commandstats``: the
  scripts of other clients of the same server count too).

    .venv/bin/python bench/kept_scores.py
    .venv/bin/python bench/kept_scores.py --store redis --scores 1000000

Redis: a fresh key prefix per run, deleted afterwards. SQLite: a temporary folder, removed.
The machine's cores are shared by the bench and the store's thread (SQLite) or the Redis server.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collector.common.labels import KeptScore  # noqa: E402
from collector.store.kept_rows import member  # noqa: E402
from collector.store.redis.store import RedisStore  # noqa: E402
from collector.store.sqlite.store import SqliteStore  # noqa: E402

T0 = 1_780_000_000.0


def scores(n: int, scorers: int, seed: int = 7) -> Iterator[KeptScore]:
    """N scores of ``scorers`` scorers, a millisecond apart (made lazily)."""
    rng = random.Random(seed)
    for i in range(n):
        scorer = f"scorer-{i % scorers}"
        value = round(rng.random(), 4)
        yield KeptScore(scorer, f"Answer quality {i % scorers}", "1", f"{i % scorers:08x}", f"{rng.getrandbits(128):032x}",
                        f"{rng.getrandbits(64):016x}", None, value, "pass" if value >= 0.5 else "fail", T0 + i / 1000)


def batches(n: int, scorers: int, size: int) -> Iterator[list[KeptScore]]:
    batch: list[KeptScore] = []
    for score in scores(n, scorers):
        batch.append(score)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


async def keep_and_scan(store: Any, args: argparse.Namespace) -> tuple[float, list[float], float]:
    """Keep every score (timing each call), then scan them back; (keep s, call times, scan s)."""
    calls: list[float] = []
    start = time.perf_counter()
    for batch in batches(args.scores, args.scorers, args.batch):
        began = time.perf_counter()
        await store.keep_scores(batch, max_per_scorer=args.max_per_scorer, retain_s=1e9)
        calls.append(time.perf_counter() - began)
    keep_s = time.perf_counter() - start
    start, read, last = time.perf_counter(), 0, (0.0, b"")
    async for got in store.scan_kept_scores(batch=10_000):
        for score in got:
            key = (score.at, member(score))
            assert key >= last, "scan out of order"
            last = key
        read += len(got)
    scan_s = time.perf_counter() - start
    assert read == args.scores == await store.kept_score_count(), (read, args.scores)
    return keep_s, calls, scan_s


def describe(kind: str, n: int, keep_s: float, calls: list[float], scan_s: float, size: str) -> str:
    ms = sorted(c * 1000 for c in calls)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return (f"{kind}: {size}; keep {n / keep_s:,.0f} scores/s ({len(calls):,} calls, p50 "
            f"{statistics.median(ms):.2f} ms, p99 {p99:.2f} ms); scan {n / scan_s:,.0f} scores/s")


async def bench_sqlite(args: argparse.Namespace, folder: Path) -> str:
    path = str(folder / "q.db")
    store = SqliteStore(path)
    await store.start()
    await store.shutdown()
    before = await asyncio.to_thread(os.path.getsize, path)
    store = SqliteStore(path)
    await store.start()
    try:
        keep_s, calls, scan_s = await keep_and_scan(store, args)
    finally:
        await store.shutdown()
    grown = await asyncio.to_thread(os.path.getsize, path) - before
    return describe("sqlite", args.scores, keep_s, calls, scan_s,
                    f"{grown / args.scores:.1f} bytes per kept score (file +{grown / 1e6:.1f} MB)")


async def key_bytes(client: Any, pattern: str) -> tuple[int, int]:
    """(keys, their MEMORY USAGE summed) under ``pattern``."""
    keys = [key async for key in client.scan_iter(match=pattern, count=1000)]
    total = 0
    for first in range(0, len(keys), 1000):
        async with client.pipeline(transaction=False) as pipe:
            for key in keys[first:first + 1000]:
                pipe.memory_usage(key, samples=0)
            total += sum(int(x or 0) for x in await pipe.execute())
    return len(keys), total


async def script_usec(client: Any) -> int:
    """Microseconds Redis spent in ``EVALSHA`` so far (``INFO commandstats``: every client's)."""
    stats = await client.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("usec", 0))


async def plain_layout_bytes(client: Any, prefix: str, args: argparse.Namespace) -> tuple[int, int]:
    """The same scores as a JSON-row hash and a sorted set per scorer (the plain layout)."""
    for batch in batches(args.scores, args.scorers, 1000):
        async with client.pipeline(transaction=False) as pipe:
            for score in batch:
                field = "\x1f".join((score.version, score.revision, score.keys[0]))
                pipe.hset(f"{prefix}plain:rows:{score.scorer_id}", field, score.to_row())
                pipe.zadd(f"{prefix}plain:times:{score.scorer_id}", {field: score.at})
            await pipe.execute()
    return await key_bytes(client, prefix + "plain:*")


async def bench_redis(args: argparse.Namespace) -> list[str]:
    prefix = f"bench-kept-{uuid.uuid4().hex[:8]}:"
    store = RedisStore(args.redis_url, key_prefix=prefix, block_ms=0)
    await store.start()
    try:
        before = await script_usec(store.client)
        keep_s, calls, scan_s = await keep_and_scan(store, args)
        server = await script_usec(store.client) - before
        keys, used = await key_bytes(store.client, store.keys.prefix + "kept:*")
        lines = [describe("redis", args.scores, keep_s, calls, scan_s,
                          f"{used / args.scores:.1f} bytes per kept score ({keys:,} keys, {used / 1e6:.1f} MB)")
                 + f"; Redis's time in scripts {server / args.scores:.1f} µs a score, keep and scan"]
        if args.plain:
            plain_keys, plain = await plain_layout_bytes(store.client, store.keys.prefix, args)
            lines.append(f"redis, plain layout (JSON rows in a hash + a sorted set per scorer): "
                         f"{plain / args.scores:.1f} bytes per kept score ({plain_keys} keys, {plain / 1e6:.1f} MB); "
                         f"ratio kept_rows / plain {used / plain:.2f}")
        return lines
    finally:
        await store.delete_all()
        await store.shutdown()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["sqlite", "redis", "both"], default="both")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--scores", type=int, default=100_000)
    parser.add_argument("--scorers", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64, help="scores per keep_scores call")
    parser.add_argument("--max-per-scorer", type=int, default=0,
                        help="keep_scores' bound (default: scores / scorers, so every scorer is at its bound)")
    parser.add_argument("--plain", action=argparse.BooleanOptionalAction, default=True,
                        help="also measure the plain Redis layout")
    args = parser.parse_args()
    args.max_per_scorer = args.max_per_scorer or -(-args.scores // args.scorers)
    folder = Path(tempfile.mkdtemp(prefix="tracescore-kept-"))
    print(f"kept scores bench: {args.scores:,} scores of {args.scorers} scorers, keep_scores batches of "
          f"{args.batch}, max_per_scorer {args.max_per_scorer:,}; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}", flush=True)
    try:
        if args.store in ("sqlite", "both"):
            print(await bench_sqlite(args, folder), flush=True)
        if args.store in ("redis", "both"):
            for line in await bench_redis(args):
                print(line, flush=True)
    finally:
        shutil.rmtree(folder)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
