"""Conversations (SPEC §7, issue 20): sessions tracked per second, memory per 10,000 open
sessions, and how soon after ``idle_s`` a session's score is exported.

For each store (``--store sqlite``, ``--store redis``; default both), in this process:

* **throughput**: N sessions (``--sessions``) of T turns (``--turns``) noted through the real
  store's ``note_turns`` in batches of 64 turns (as assembly sends them: one call per batch
  of decided traces, so a batch holds turns of 64 different sessions; turn 1 of every
  session, then turn 2, ...), then every session taken with ``take_due_sessions`` (64 at a
  time, as the scheduler does) and marked with ``sessions_scored``. Each turn is a real
  RunRecord as assembly makes it: ``tests/support/conversation_traces.turn_body`` decoded by
  `collector.assemble.decide.RunDecider` (adapters + ``run_record``), with fresh ids per turn.
* **memory per 10,000 open sessions** of T turns: on SQLite the growth of the database file
  (its pages: the file's size once checkpointed) and this process's RSS (the process holding the store, as the daemon
  does; ~0 expected: the state is in the file); on Redis ``INFO memory`` ``used_memory``.

Then, with ``--timeliness`` (on by default; ``--no-timeliness`` skips it), end to end on a
real ``tracescore serve`` (SQLite, one conversation scorer, ``[sessions] idle_s = 2``): K
sessions (``--timeliness-sessions``) of 3 turns posted over OTLP/HTTP, their starts spread
over a few seconds, and per session the delay from "last turn received (its 200) + idle_s"
to "score exported" (an OTLP/gRPC backend in this process timestamps the evaluation span),
p50 and p99. It includes ``decision_wait`` (the turn is noted after it): SPEC bar p99 <= 2 s.

    .venv/bin/python bench/sessions.py
    .venv/bin/python bench/sessions.py --store redis --sessions 20000

Redis: a fresh key prefix per run, deleted afterwards. The machine's cores are shared by the
bench, the store's thread (SQLite) or the Redis server, and the daemon.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))
from conversation_traces import TURNS, turn_body  # noqa: E402  (tests/support)
from scale import Backend, free_port, wait_ready  # noqa: E402  (bench/)

import adapters  # noqa: E402
from collector.assemble.decide import RunDecider  # noqa: E402
from collector.common.metrics import Metrics  # noqa: E402
from collector.common.session_types import SessionTurn, session_scope  # noqa: E402
from collector.common.types import RunRecord, TraceChunk  # noqa: E402
from collector.config import SessionsConfig  # noqa: E402
from collector.store.interface import SessionRules  # noqa: E402
from collector.store.redis.store import RedisStore  # noqa: E402
from collector.store.sqlite.store import SqliteStore  # noqa: E402

BATCH = 64
"""Turns per ``note_turns`` call: assembly decides up to 64 traces per batch."""

TAKE_LIMIT = 64
"""Sessions per ``take_due_sessions`` call (`SessionScheduler.schedule_due`'s limit)."""

SCORER = '''from scorers import create_scorer
user_turns = create_scorer(id="user_turns", description="user messages in the conversation",
                           type="conversation").generate_score(lambda run: float(len(run.input.input_messages)))
'''


class _ConversationsOnly:
    """A scorer selection with a conversation scorer and no run scorer (turns are noted, no job)."""

    has_conversation_scorers = True
    entries: tuple[Any, ...] = ()

    def decisions(self, **run: Any) -> tuple[Any, ...]:
        return ()


def template_turns(turns: int) -> list[RunRecord]:
    """Turn 0..turns-1 of the shared conversation as assembly records them (its RunRecords)."""
    decider = RunDecider(adapters, _ConversationsOnly(), Metrics(), SessionsConfig())  # type: ignore[arg-type]
    records = []
    for index in range(turns):
        history = TURNS if index < len(TURNS) else TURNS + tuple(TURNS[-1] for _ in range(index + 1 - len(TURNS)))
        body, trace_id, _ = turn_body("bench-template", index, turns=history)
        decided = decider.decide(bytes.fromhex(trace_id), [TraceChunk(bytes.fromhex(trace_id), "spans", body, 2, True)])
        (turn,) = decided.turns
        records.append(turn.run)
    return records


def turn_batches(templates: Sequence[RunRecord], sessions: int, run_tag: str) -> Iterator[list[SessionTurn]]:
    """Every session's turns, turn 1 of all sessions first, in batches of `BATCH` (made lazily,
    so the bench holds one batch at a time)."""
    batch: list[SessionTurn] = []
    for index, template in enumerate(templates):
        for n in range(sessions):
            session_id = f"{run_tag}-{n}"
            run = replace(template, trace_id=secrets.token_hex(16), span_id=secrets.token_hex(8),
                          session_id=session_id, start_ns=template.start_ns + index)
            batch.append(SessionTurn(session_scope(run.service, session_id), session_id, run))
            if len(batch) == BATCH:
                yield batch
                batch = []
    if batch:
        yield batch


def rss_bytes(pid: int | str = "self") -> int:
    """A process's resident set size (Linux /proc; default this one)."""
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@dataclass
class StoreFigures:
    """What one store measured."""

    turns: int
    sessions: int
    note_s: float
    note_calls: list[float]
    take_s: float
    scored_s: float
    taken: int
    memory: str


async def _memory_probe(store: Any, kind: str) -> int:
    """The store's footprint now: the SQLite database's size (its pages, the WAL's committed ones
    included: the file's size once checkpointed), or Redis' used_memory."""
    if kind == "sqlite":
        pages = await store._runner.call(lambda db: db.execute("PRAGMA page_count").fetchone()[0]
                                         * db.execute("PRAGMA page_size").fetchone()[0])
        return int(pages)
    info = await store.client.info("memory")
    return int(info["used_memory"])


async def bench_store(kind: str, args: argparse.Namespace, templates: Sequence[RunRecord], folder: Path) -> StoreFigures:
    """Note, take and mark N sessions of T turns in a fresh store of ``kind``; measure memory."""
    rules = SessionRules(idle_s=300.0)
    prefix = f"bench-sessions-{uuid.uuid4().hex[:10]}:"
    path = folder / f"{prefix.rstrip(':')}.db" if kind == "sqlite" else None
    store: Any = (SqliteStore(str(path), session_rules=rules) if kind == "sqlite"
                  else RedisStore(args.redis_url, key_prefix=prefix, session_rules=rules))
    await store.start()
    try:
        before_mem = await _memory_probe(store, kind)
        before_rss = rss_bytes()
        now = time.time()
        calls: list[float] = []
        turns = 0
        started = time.perf_counter()
        for batch in turn_batches(templates, args.sessions, prefix.rstrip(":")):
            t0 = time.perf_counter()
            await store.note_turns(batch, now)
            calls.append(time.perf_counter() - t0)
            turns += len(batch)
        note_s = time.perf_counter() - started
        counts = await store.session_counts()
        if counts["open"] != args.sessions:
            raise SystemExit(f"{kind}: {counts['open']} sessions open, {args.sessions} expected")
        after_rss = rss_bytes()
        after_mem = await _memory_probe(store, kind)
        per_10k = (after_mem - before_mem) * 10_000 / args.sessions
        rss_10k = (after_rss - before_rss) * 10_000 / args.sessions
        if kind == "sqlite":
            memory = (f"database file +{per_10k / 2**20:.1f} MiB, process RSS {rss_10k / 2**20:+.1f} MiB "
                      f"per 10,000 open sessions of {len(templates)} turns")
        else:
            memory = f"Redis used_memory +{per_10k / 2**20:.1f} MiB per 10,000 open sessions of {len(templates)} turns"
        later = now + rules.idle_s + 1  # every session due (the store takes the time it is given)
        take_s = scored_s = 0.0
        taken = 0
        for _ in range(args.sessions // TAKE_LIMIT + 2):  # bounded: one more call than needed
            t0 = time.perf_counter()
            due = await store.take_due_sessions(later, TAKE_LIMIT, 60.0)
            t1 = time.perf_counter()
            if not due:
                break
            await store.sessions_scored(due, later)
            take_s += t1 - t0
            scored_s += time.perf_counter() - t1
            taken += len(due)
        if taken != args.sessions:
            raise SystemExit(f"{kind}: {taken} sessions taken, {args.sessions} expected")
        return StoreFigures(turns, args.sessions, note_s, calls, take_s, scored_s, taken, memory)
    finally:
        if kind == "redis":
            await store.delete_all()
        await store.shutdown()
        if path is not None:  # the database, its WAL and the request segments beside it
            for leftover in path.parent.glob(f"{path.name}*"):
                if leftover.is_dir():
                    shutil.rmtree(leftover)
                else:
                    leftover.unlink()


def describe(kind: str, f: StoreFigures, turns_each: int) -> list[str]:
    calls = sorted(f.note_calls)
    p99 = calls[max(0, int(len(calls) * 0.99) - 1)]
    return [
        f"{kind}: note_turns: {f.sessions / f.note_s:,.0f} sessions/s tracked ({f.turns / f.note_s:,.0f} turns/s; "
        f"{f.sessions:,} sessions x {turns_each} turns in {len(calls)} calls of {BATCH}, {f.note_s:.2f} s; "
        f"per call median {statistics.median(calls) * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms, "
        f"first {f.note_calls[0] * 1e3:.1f} ms, last {f.note_calls[-1] * 1e3:.1f} ms)",
        f"{kind}: take_due_sessions + sessions_scored: {f.taken / (f.take_s + f.scored_s):,.0f} sessions/s "
        f"(take {f.taken / f.take_s:,.0f}/s, scored {f.taken / f.scored_s:,.0f}/s; {TAKE_LIMIT} per call)",
        f"{kind}: {f.memory}",
    ]


async def timeliness(args: argparse.Namespace, folder: Path) -> list[str]:
    """K sessions of 3 turns through a real ``tracescore serve`` (SQLite): p50/p99 of exported -
    (last turn received + idle_s)."""
    idle_s, decision_wait = 2.0, 0.2
    backend = Backend()
    server = grpc.aio.server()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(backend, server)
    backend_port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    (folder / "bench_convo_scorers.py").write_text(SCORER)
    port = free_port()
    config = folder / "serve.toml"
    config.write_text(
        f'[receiver]\ngrpc_endpoint = ""\nhttp_endpoint = "127.0.0.1:{port}"\n'
        f'[assembly]\ndecision_wait = {decision_wait}\n'
        f'[sessions]\nidle_s = {idle_s}\n'
        f'[queue]\nurl = "sqlite:///{folder / "serve.db"}"\n'
        f'[export]\nendpoint = "http://127.0.0.1:{backend_port}"\nforward_spans = false\n'
        f'[[scorers]]\nref = "{folder / "bench_convo_scorers.py"}:user_turns"\n'
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(ROOT)}
    k = args.timeliness_sessions
    tag = uuid.uuid4().hex[:8]
    sessions = [[turn_body(f"{tag}-{n}", i) for i in range(3)] for n in range(k)]
    received: dict[bytes, float] = {}  # last turn's trace id -> its 200
    with (folder / "serve.log").open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "collector.cli", "serve", "--config", str(config),
            cwd=ROOT, env=env, stderr=log)
    try:
        async with aiohttp.ClientSession() as http:
            await wait_ready(http, port, proc)
            url = f"http://127.0.0.1:{port}/v1/traces"
            started = time.perf_counter()

            async def converse(n: int) -> None:
                await asyncio.sleep(n * args.timeliness_spread / k)  # starts spread over the spread
                for i, (body, trace_id, _) in enumerate(sessions[n]):
                    if i:
                        await asyncio.sleep(0.3)  # well under idle_s: one session
                    async with http.post(url, data=body, headers={"Content-Type": "application/x-protobuf"}) as resp:
                        await resp.read()
                        if resp.status != 200:
                            raise SystemExit(f"a turn was refused ({resp.status})")
                    if i == 2:
                        received[bytes.fromhex(trace_id)] = time.perf_counter()

            await asyncio.gather(*(converse(n) for n in range(k)))
            deadline = time.monotonic() + 60
            while len(backend.arrived) < k:
                if time.monotonic() > deadline:
                    break  # reported below: the sessions scored so far
                await asyncio.sleep(0.02)
        daemon_rss = rss_bytes(proc.pid)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 60)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        await server.stop(0.5)
    scored = [backend.arrived[t] - (received[t] + idle_s) for t in received if t in backend.arrived]
    if not scored:
        raise SystemExit(f"timeliness: no session scored within 60 s (see {folder / 'serve.log'})")
    delays = sorted(scored)
    p99 = delays[max(0, int(len(delays) * 0.99) - 1)]
    return [
        f"timeliness (serve, sqlite; idle_s {idle_s:g}, decision_wait {decision_wait:g} s included): {len(delays)}/{k} "
        f"sessions of 3 turns scored; exported - (last turn received + idle_s): p50 {statistics.median(delays) * 1e3:.0f} ms, "
        f"p99 {p99 * 1e3:.0f} ms, max {delays[-1] * 1e3:.0f} ms (bar p99 <= 2000 ms: "
        f"{'met' if p99 <= 2.0 else 'NOT met'}); sent over {time.perf_counter() - started:.1f} s; "
        f"re-sent {backend.received - len(backend.arrived)}; daemon RSS {daemon_rss / 2**20:.0f} MiB after",
    ]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["sqlite", "redis", "both"], default="both")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--sessions", type=int, default=10_000, help="sessions noted, taken and marked per store")
    parser.add_argument("--turns", type=int, default=3, help="turns per session")
    parser.add_argument("--timeliness", action=argparse.BooleanOptionalAction, default=True,
                        help="the end-to-end round on a real serve (SQLite)")
    parser.add_argument("--timeliness-sessions", type=int, default=200)
    parser.add_argument("--timeliness-spread", type=float, default=5.0, help="seconds over which sessions start")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="tracescore-sessions-"))
    templates = template_turns(args.turns)
    sizes = ", ".join(f"{len(t.to_json())}" for t in templates)
    load = os.getloadavg()
    print(f"sessions bench: {args.sessions:,} sessions x {args.turns} turns per store (turn records {sizes} bytes "
          f"of JSON); {os.cpu_count()} CPUs, load average {load[0]:.2f}; files in {folder} (removed at the end)", flush=True)
    for kind in (["sqlite", "redis"] if args.store == "both" else [args.store]):
        figures = await bench_store(kind, args, templates, folder)
        for line in describe(kind, figures, args.turns):
            print(line, flush=True)
    if args.timeliness:
        for line in await timeliness(args, folder):
            print(line, flush=True)
    else:
        print("timeliness: skipped (--no-timeliness)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    shutil.rmtree(folder)  # kept when a step failed (the daemon's log is there)


if __name__ == "__main__":
    asyncio.run(main())
