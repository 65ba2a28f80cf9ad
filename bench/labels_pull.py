"""Labels pulled per second (SPEC §11): `LabelPuller.pull` from Langfuse into the store.

The loopback Langfuse test server (`tests/support/langfuse_server.py`, in this process) is
seeded with ``--labels`` people's scores (default 20,000: ``source = ANNOTATION``, on
observations of distinct runs, over ``--scorers`` scorer names, booleans, numbers and
categories, a comment and an author each, given over the last day). Then, into each store
(``--store sqlite``, ``--store redis``; default both; Redis under a fresh key prefix, deleted
afterwards; SQLite in a temporary folder, removed), one `LabelPuller` (the one ``tracescore
labels pull`` and the daemons run, with the Langfuse reader of ``[labels] from = ["langfuse"]``)
pulls:

1. **first**: every label (no cursor: the last ``since`` = 30 days), checked all kept;
2. **again**: nothing changed. Langfuse filters scores by the time they were given, not edited,
   so every pull reads the whole window again (`collector.receive.labels.sweep`) and keeps only
   what changed: its time is what a daemon pays every ``poll_s``;
3. **after changes**: ``--changes`` labels edited (a new value, ``updatedAt`` now) and as many
   new ones given, checked kept (and nothing else).

Each line gives labels/s over the pull's wall time, and the same without the time the fake
server spent in its score handler (timed around it: building, validating and serialising its
answer), which is not tracescore's: that is the figure for tracescore. Also the process CPU
(this process: the puller, the server, and SQLite's thread) and, on Redis, the Redis server's
CPU (``INFO cpu``, every client of the server included).

The test server answers each page by filtering and sorting every stored score (``matching``),
and checks one row of each shape of the page against the ``langfuse`` package's types
(``checked_sample``; several milliseconds a row). Both are the fake server's costs, not
tracescore's, and would dwarf the pull (with 20,000 scores the sort alone is quadratic over
the pages), so here the server keeps its sorted answer between the pages of one query and
checks each shape of row once, on the first page that has it (`lighten_server`;
``--server-as-is``: as the tests run it). What the handler still takes is timed and left out of
the second figure.

    .venv/bin/python bench/labels_pull.py
    .venv/bin/python bench/labels_pull.py --store redis --labels 50000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "support")]

import langfuse_scores  # noqa: E402
from aiohttp import web  # noqa: E402
from langfuse_scores import iso_ms  # noqa: E402
from langfuse_server import LangfuseServer  # noqa: E402

from collector.config import LangfuseSinkConfig, SinksConfig  # noqa: E402
from collector.receive.labels import LangfuseLabels  # noqa: E402
from collector.receive.labels.puller import LabelPuller, PullRecord  # noqa: E402
from collector.store.redis.store import RedisStore  # noqa: E402
from collector.store.sqlite.store import SqliteStore  # noqa: E402

DAY = 86_400.0
SINCE_S = 30 * DAY


class TimedLangfuse(LangfuseServer):
    """The Langfuse test server, with the time its score handlers take counted, and (``cached``)
    its filtered and sorted scores kept between the pages of one query."""

    def __init__(self, cached: bool = True) -> None:
        super().__init__()
        self.cached = cached
        self.handler_s = 0.0  # wall time in the score handlers
        self.requests = 0
        self._stored: list[dict[str, Any]] | None = None

    def changed(self) -> None:
        """Scores were seeded or edited: the cached lists are stale."""
        self._stored = None

    def stored_scores(self) -> list[dict[str, Any]]:
        if not self.cached:
            return super().stored_scores()
        if self._stored is None:
            self._stored = super().stored_scores()
        return self._stored

    async def _timed(self, handler: Callable[[web.Request], Awaitable[web.Response]],
                     request: web.Request) -> web.Response:
        began = time.perf_counter()
        try:
            return await handler(request)
        finally:
            self.handler_s += time.perf_counter() - began
            self.requests += 1

    async def _scores_v3(self, request: web.Request) -> web.Response:
        return await self._timed(super()._scores_v3, request)

    async def _scores_v2(self, request: web.Request) -> web.Response:
        return await self._timed(super()._scores_v2, request)


def lighten_server() -> None:
    """Make the server's ``matching`` (filter and sort every stored score) remember its answer for
    one list of scores and one query, the page's cursor aside (`TimedLangfuse.stored_scores`
    keeps the list the same object until the scores change), and its ``checked_sample`` (the
    rows of a page checked against the SDK's types: one of each shape) leave out the shapes it
    has already had checked on an earlier page."""
    plain_matching, plain_sample = langfuse_scores.matching, langfuse_scores.checked_sample
    memo: dict[tuple[int, tuple[tuple[str, str], ...]], Any] = {}
    checked: set[str] = set()

    def matching(scores: list[dict[str, Any]], query: Any) -> Any:
        key = (id(scores), tuple(sorted((k, v) for k, v in query.items() if k != "cursor")))
        if key not in memo:
            memo.clear()
            memo[key] = plain_matching(scores, query)
        return memo[key]

    def checked_sample(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        fresh = []
        for row in plain_sample(rows):
            shape = repr((row.get("dataType"), (row.get("subject") or {}).get("kind"),
                          sorted(k for k, v in row.items() if v is not None)))
            if shape not in checked:
                checked.add(shape)
                fresh.append(row)
        return fresh

    langfuse_scores.matching = matching
    langfuse_scores.checked_sample = checked_sample


def seed(server: TimedLangfuse, n: int, scorers: int, rng: random.Random, now: float,
         spread_s: float = DAY) -> list[tuple[str, str]]:
    """``n`` people's scores on distinct runs' observations, given between 1 minute and ``spread_s``
    more before ``now`` (each edited up to 30 s after), as `LangfuseServer.add_score` keeps them
    (written directly: ``add_score`` looks for an earlier score of the same id among every stored
    one, which is quadratic for tens of thousands). Returns their (id, timestamp) keys."""
    keys = []
    for i in range(n):
        kind = ("BOOLEAN", "NUMERIC", "CATEGORICAL")[i % 3]
        value: float | str = (rng.random() < 0.5) * 1 if kind == "BOOLEAN" else (
            round(rng.random(), 3) if kind == "NUMERIC" else rng.choice(["good", "bad", "unsure"]))
        given = now - rng.uniform(60, 60 + spread_s)
        key = (str(uuid.UUID(int=rng.getrandbits(128))), iso_ms(given))
        server.scores[key] = {
            "id": key[0], "name": f"Quality {i % scorers}", "value": value, "dataType": kind, "source": "ANNOTATION",
            "timestamp": key[1], "traceId": f"{rng.getrandbits(128):032x}", "observationId": f"{rng.getrandbits(64):016x}",
            "comment": rng.choice(["fine", "misses the question", "too long", "cites no source"]),
            "authorUserId": f"user-{i % 7}"}
        server._stamp(key, given + rng.uniform(0, 30))
        keys.append(key)
    server.changed()
    return keys


def change(server: TimedLangfuse, keys: list[tuple[str, str]], count: int, scorers: int,
           rng: random.Random) -> None:
    """Edit ``count`` of the seeded labels (a new value and comment, ``updatedAt`` now, as an edit
    in Langfuse's UI) and give ``count`` new ones."""
    for key in rng.sample(keys, count):
        body = server.scores[key]
        body["value"] = 1 - body["value"] if body["dataType"] == "BOOLEAN" else (
            "bad" if body["dataType"] == "CATEGORICAL" else round(rng.random(), 3))
        body["comment"] = "edited"
        server._stamp(key)
    seed(server, count, scorers, rng, time.time(), spread_s=60)


async def redis_cpu_s(store: Any) -> float:
    """The Redis server's CPU seconds so far (user + system)."""
    info = await store.client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def timed_pull(puller: LabelPuller, server: TimedLangfuse, store: Any) -> tuple[PullRecord, dict[str, float]]:
    """One pull, and what it took: wall, server handler, this process's CPU, Redis's CPU."""
    handler0, requests0 = server.handler_s, server.requests
    redis0 = await redis_cpu_s(store) if isinstance(store, RedisStore) else 0.0
    cpu0, began = time.process_time(), time.perf_counter()
    record = await puller.pull()
    wall, cpu = time.perf_counter() - began, time.process_time() - cpu0
    if record is None:
        raise SystemExit("the pull lease was taken: is another pull of this store running?")
    redis = (await redis_cpu_s(store) - redis0) if isinstance(store, RedisStore) else 0.0
    return record, {"wall": wall, "server": server.handler_s - handler0, "requests": server.requests - requests0,
                    "cpu": cpu, "redis": redis}


def line(kind: str, what: str, record: PullRecord, t: dict[str, float], swept: int, stored: int) -> str:
    """One pull's figures: the scores it swept (every one in the window) and the labels it handed
    on (new or changed), per second of its wall time, and of that time less the server's."""
    pulled = record.sources[0]
    if pulled.error:
        raise SystemExit(f"{kind} {what}: the pull stopped: {pulled.error}")
    own = t["wall"] - t["server"]
    redis = f", Redis CPU {t['redis']:.2f} s" if kind == "redis" else ""
    return (f"{kind} {what}: swept {swept:,} scores ({t['requests']:.0f} requests), {pulled.added:,} labels new "
            f"or changed, in {t['wall']:.2f} s ({swept / t['wall']:,.0f} swept/s, {pulled.added / t['wall']:,.0f} "
            f"labels/s); the server's handler {t['server']:.2f} s ({t['server'] / t['wall']:.0%}); without it "
            f"{own:.2f} s: {swept / own:,.0f} swept/s, {pulled.added / own:,.0f} labels/s; process CPU "
            f"{t['cpu']:.2f} s{redis}; {stored:,} labels in the store")


async def bench_store(kind: str, args: argparse.Namespace, server: TimedLangfuse, folder: Path,
                      keys: list[tuple[str, str]], rng: random.Random) -> None:
    """The three pulls into one store."""
    store: Any = (SqliteStore(str(folder / "q.db")) if kind == "sqlite"
                  else RedisStore(args.redis_url, key_prefix=f"bench-labels-{uuid.uuid4().hex[:8]}:", block_ms=0))
    await store.start()
    try:
        sinks = SinksConfig(langfuse=LangfuseSinkConfig(host=server.url, public_key=server.public_key,
                                                        secret_key=server.secret_key))
        names = [f"Quality {i}" for i in range(args.scorers)]
        puller = LabelPuller(store, [LangfuseLabels(sinks)], names, since_s=SINCE_S, poll_s=300.0,
                             holder=f"bench:{os.getpid()}")

        async def count() -> int:
            return sum((await store.label_counts()).values())

        record, t = await timed_pull(puller, server, store)
        stored = await count()
        print(line(kind, "first pull", record, t, len(server.scores), stored), flush=True)
        assert record.sources[0].added == args.labels == stored, (record, stored)
        cursor = await store.label_cursor("langfuse") or ""
        print(f"{kind} cursor after it: {len(cursor):,} bytes", flush=True)
        record, t = await timed_pull(puller, server, store)
        print(line(kind, "again, nothing changed", record, t, len(server.scores), await count()), flush=True)
        assert record.sources[0].added == 0, record
        change(server, keys, args.changes, args.scorers, rng)
        record, t = await timed_pull(puller, server, store)
        stored = await count()
        print(line(kind, f"after {args.changes} edited and {args.changes} new", record, t, len(server.scores), stored),
              flush=True)
        assert record.sources[0].added == 2 * args.changes and stored == args.labels + args.changes, (record, stored)
    finally:
        if isinstance(store, RedisStore):
            await store.delete_all()
        await store.shutdown()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["sqlite", "redis"], action="append")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--labels", type=int, default=20_000)
    parser.add_argument("--scorers", type=int, default=4, help="scorer names the labels are spread over")
    parser.add_argument("--changes", type=int, default=200, help="labels edited, and new ones, before the third pull")
    parser.add_argument("--server-as-is", action="store_true",
                        help="the server filters and sorts every stored score for every page, as the tests run it")
    args = parser.parse_args()
    if not args.server_as_is:
        lighten_server()
    print(f"labels pull bench: {args.labels:,} Langfuse ANNOTATION scores over {args.scorers} scorer names, "
          f"{'the server as the tests run it' if args.server_as_is else 'the server lightened (its sort cached, each row shape checked once)'}; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}", flush=True)
    for kind in args.store or ["sqlite", "redis"]:
        server = await TimedLangfuse(cached=not args.server_as_is).start()
        folder = Path(tempfile.mkdtemp(prefix="tracescore-labels-pull-"))
        rng = random.Random(5)
        try:
            keys = seed(server, args.labels, args.scorers, rng, time.time())
            await bench_store(kind, args, server, folder, keys, rng)
        finally:
            await server.stop()
            shutil.rmtree(folder, ignore_errors=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
