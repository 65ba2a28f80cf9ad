"""What one measure of the agreement watch costs a daemon process (SPEC §11), and how long it
holds its event loop.

`collector.work.agreement.AgreementWatch.refresh` is what every process of a deployment (every
receiver and worker) runs every ``[labels] poll_s``: it reads the label counts, the labels and
every kept score of the window from the store, and measures (`collector.status.agreement.measure`).
Here, in this process, into each store (``--store sqlite``, ``--store redis``; default both;
Redis under a fresh key prefix, deleted afterwards): ``--scores`` kept scores of one scorer
(default 100,000: ``[labels] keep_scores``'s default, what one busy scorer holds), labels on
one in ``--every`` of them; then ``--measures`` refreshes, each timed (wall and this process's
CPU) while a task sleeping 5 ms at a time records how late it wakes: the longest wait is how
long the refresh held the event loop at a stretch (what a run being scored in that process
waits), the sum of the waits over 50 ms how long in all.

The process's first refresh also imports scipy and scikit-learn (its first statistics), as the
first measure with pairs of a daemon does.

    .venv/bin/python bench/agreement_watch.py
    .venv/bin/python bench/agreement_watch.py --store redis --scores 10000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from kept_scores import batches  # noqa: E402

from collector.common.labels import Label  # noqa: E402
from collector.common.metrics import Metrics  # noqa: E402
from collector.config import ScorerConfig  # noqa: E402
from collector.status.verdicts import rules_from_config  # noqa: E402
from collector.store.redis.store import RedisStore  # noqa: E402
from collector.store.sqlite.store import SqliteStore  # noqa: E402
from collector.work.agreement import AgreementWatch  # noqa: E402

TICK_S = 0.005


async def ticker(waits: list[float], stop: asyncio.Event) -> None:
    """Sleep ``TICK_S`` at a time until ``stop``; note how late each wake-up was."""
    while not stop.is_set():
        began = time.perf_counter()
        await asyncio.sleep(TICK_S)
        waits.append(time.perf_counter() - began - TICK_S)


async def fill(store: Any, args: argparse.Namespace) -> tuple[str, int]:
    """Keep the scores and the labels; (the scorer's name, labels kept)."""
    labels: list[Label] = []
    name = ""
    for batch in batches(args.scores, 1, 1000):
        await store.keep_scores(batch, max_per_scorer=args.scores, retain_s=1e12)
        name = batch[0].name
        labels += [Label(s.name, s.trace_id, s.span_id, None, s.score >= 0.5, "file", "bench")
                   for s in batch[::args.every]]
    await store.put_labels(labels)
    return name, len(labels)


async def bench_store(kind: str, store: Any, args: argparse.Namespace) -> None:
    """Fill one store, then time the refreshes."""
    await store.start()
    try:
        name, labelled = await fill(store, args)
        rules = rules_from_config([(name, "scorer-0", ScorerConfig(ref="bench:scorer"))])
        watch = AgreementWatch(store, rules, Metrics(), window_s=1e12, poll_s=300.0)
        for k in range(args.measures):
            fresh = "sklearn.metrics" not in sys.modules
            waits: list[float] = []
            stop = asyncio.Event()
            tick = asyncio.create_task(ticker(waits, stop))
            cpu, began = time.process_time(), time.perf_counter()
            report = await watch.refresh()
            wall, cpu = time.perf_counter() - began, time.process_time() - cpu
            stop.set()
            await tick
            assert report is not None and report.series, report
            series = report.series[0]
            print(f"{kind}: refresh {k + 1}{' (imports scipy, scikit-learn)' if fresh else ''}: "
                  f"{wall:.2f} s, CPU {cpu:.2f} s, n {series.n:,} of {series.n_scored:,} kept scores "
                  f"({labelled:,} labels); event loop held at most {max(waits) * 1e3:.0f} ms at a stretch, "
                  f"{sum(w for w in waits if w > 0.05):.2f} s in waits over 50 ms", flush=True)
    finally:
        if isinstance(store, RedisStore):
            await store.delete_all()
        await store.shutdown()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["sqlite", "redis"], action="append")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--scores", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=300, help="a label on one kept score in this many")
    parser.add_argument("--measures", type=int, default=3)
    args = parser.parse_args()
    print(f"agreement watch bench: {args.scores:,} kept scores of one scorer; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    for kind in args.store or ["sqlite", "redis"]:
        if kind == "redis":
            await bench_store(kind, RedisStore(args.redis_url, key_prefix=f"bench-watch-{uuid.uuid4().hex[:8]}:",
                                               block_ms=0), args)
        else:
            folder = Path(tempfile.mkdtemp(prefix="tracescore-watch-"))
            try:
                await bench_store(kind, SqliteStore(str(folder / "q.db")), args)
            finally:
                shutil.rmtree(folder, ignore_errors=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
