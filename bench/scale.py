"""End-to-end scoring throughput and latency: function-scorer runs/s, received->exported.

On Redis (``--store redis``, the default) each round starts, as separate processes, one
``tracescore serve --role receiver`` and N ``--role worker`` on one Redis (a fresh key
prefix per round, deleted afterwards); on SQLite (``--store sqlite``) one ``tracescore
serve`` (the embedded store: one process does everything). An in-process OTLP/gRPC backend
timestamps every score span it receives. The client posts R runs (agent traces:
``invoke_agent`` root + ``chat`` child) as OTLP/HTTP protobuf requests and reports

* runs/s end to end: runs / (last score received - first request sent);
* latency per run from "run span received" (the receiver's 200 for the request holding
  it: the spans are stored then) to "score exported" (the backend received the score
  span), p50 and p99. It includes ``decision_wait`` (printed) and export batching;
* CPU per run of each process (ms), from /proc; "client" is this process (the load client and
  the backend), which shares the machine's CPUs with the daemons. On Redis this includes the server holding
  the deployment's keys ("redis"); with ``--partitions N`` on a Cluster, every primary
  serving one of its partitions or its own keys, each (``redis@PORT``) and their sum
  (``redis-sum``); on one server, still one "redis" figure;
* with every run offered at once, the CPU ceiling: the runs/s those CPU costs allow at best
  (`cpu_ceiling`), and the share of it the round reached (the rest is the pipeline filling
  and draining: decision_wait, the last batches).

``--partitions N`` (Redis only) runs every daemon with ``[queue] partitions = N``: the
deployment's work spread over N key sets, each in its own hash slot (on a 3-primary Cluster,
3 partitions land one per primary).

``--compare REV`` runs every round on a worktree of REV too (checked out in a temporary
folder, removed afterwards; same virtualenv), interleaved round by round, and prints the
ratio of this tree's figures to REV's: the medians of ``--rounds`` rounds.

    .venv/bin/python bench/scale.py --runs 4000 --workers 1 2 --compare 38ea31d
    .venv/bin/python bench/scale.py --store sqlite --workers 1 --compare 38ea31d
    .venv/bin/python bench/scale.py --redis-url redis+cluster://127.0.0.1:7000,127.0.0.1:7001
    .venv/bin/python bench/scale.py --redis-url redis+cluster://127.0.0.1:7000,127.0.0.1:7001 --partitions 3

``--labels`` runs every round twice on this tree, interleaved (the order alternating round by
round): judge agreement (SPEC §11) on and off, and prints the ratio on / off. "labels off" is
``[labels] keep_scores = 0`` and no label; "labels on" keeps every score (the default
``keep_scores``), has ``--labels-count`` labels of the bench scorer on the round's runs
(``tracescore labels import`` before the daemons start; a person's verdict that agrees with the
scorer four times in five: the answers' lengths vary with ``--labels``, in both variants) and
measures agreement every ``--labels-poll-s`` (5 s) in every process; the line says how many of
the round's runs the last measure paired with a label, and in how many rounds a measure fell
within the load. ``--warmup RUNS`` first posts RUNS runs (with ``--labels``, all labelled) and
waits for their scores and, labels on, for every process's first measure over them: a process's
first measure with pairs imports scipy and scikit-learn (about a second of CPU), once in its
life, which a short round would otherwise count. ``--labels-preloaded`` adds a third variant,
labels on with those imports made before the daemon starts (see bench/README.md).

    .venv/bin/python bench/scale.py --labels --warmup 200 --rounds 5
    .venv/bin/python bench/scale.py --store sqlite --labels --warmup 200 --rounds 5

Every process (client, receiver, workers, Redis) shares this machine's cores, so the
2-worker figure is bounded by the CPUs left, not by the queue.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from collector.store.redis.conn import slot_primary  # noqa: E402
from collector.store.redis.partitioned import PartitionedRedisStore, open_redis_store  # noqa: E402
from collector.store.redis.store import RedisStore  # noqa: E402

SCORER = '''
from scorers import create_scorer
length = create_scorer(id="length", description="answer length", type="agent", version="1").generate_score(
    lambda run: min(1.0, len(run.output[-1].content) / 100) if len(run.output) else 0.0)
'''
PROFILED = """import cProfile, sys, time
from collector.cli import main
sys.argv[0] = "tracescore"
profile = cProfile.Profile(time.thread_time)
try:
    profile.runcall(main, sys.argv[1:])
finally:
    profile.dump_stats({out!r})
"""
PRELOADED = """import sys
import numpy, scipy.stats, sklearn.metrics  # what judge agreement's first measure imports, now before gc.freeze
from collector.cli import main
sys.argv[0] = "tracescore"
sys.exit(main(sys.argv[1:]))
"""
MESSAGES_IN = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "What is the capital of France?"}]}])
MESSAGES_OUT = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Paris."}]}])
ANSWERS = [json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Paris." + " It is." * k}]}])
           for k in range(0, 24, 3)]
"""With ``--labels``, the answers' lengths vary (the scorer's score with them: 0.06 to 1.0), so
that judge verdicts of both kinds meet the labels (for both variants alike)."""
LABEL_NAME = "length"  # the bench scorer's name (its id): the name its scores and labels carry


def _kv(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def make_request(traces: int, varied: bool = False) -> tuple[bytes, list[bytes], list[tuple[bytes, bytes, str]]]:
    """One request with ``traces`` fresh agent traces, their trace ids, and each run's (trace id,
    root span id, answer); ``varied``: answers of `ANSWERS`' lengths, else all `MESSAGES_OUT`."""
    spans, ids, runs = [], [], []
    now = time.time_ns()
    for _ in range(traces):
        trace_id, root_id, chat_id = secrets.token_bytes(16), secrets.token_bytes(8), secrets.token_bytes(8)
        ids.append(trace_id)
        answer = ANSWERS[trace_id[0] % len(ANSWERS)] if varied else MESSAGES_OUT
        runs.append((trace_id, root_id, answer))
        messages = [_kv("gen_ai.input.messages", MESSAGES_IN), _kv("gen_ai.output.messages", answer)]
        spans.append(Span(trace_id=trace_id, span_id=chat_id, parent_span_id=root_id, name="chat gpt-4o-mini",
                          start_time_unix_nano=now, end_time_unix_nano=now + 1000,
                          attributes=[_kv("gen_ai.operation.name", "chat"), *messages]))
        spans.append(Span(trace_id=trace_id, span_id=root_id, name="invoke_agent bench",
                          start_time_unix_nano=now, end_time_unix_nano=now + 2000,
                          attributes=[_kv("gen_ai.operation.name", "invoke_agent"),
                                      _kv("gen_ai.agent.name", "bench"), *messages]))
    resource = ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])
    resource.resource.attributes.append(_kv("service.name", "bench"))
    body = trace_service_pb2.ExportTraceServiceRequest(resource_spans=[resource]).SerializeToString()
    return body, ids, runs


def label_lines(runs: list[tuple[bytes, bytes, str]], count: int, seed: int = 11) -> str:
    """A ``labels import`` file: ``count`` labels of the bench scorer, on runs spread evenly over
    ``runs``; a person says pass when the answer is long enough to pass the scorer (at 0.5), and
    disagrees with it on one run in five (so agreement is neither perfect nor nil).

    Example:
        >>> runs = [(bytes(16), bytes(8), ANSWERS[0]), (bytes([1]) * 16, bytes([2]) * 8, ANSWERS[-1])]
        >>> [json.loads(line)["span_id"] for line in label_lines(runs, 2).splitlines()]
        ['0000000000000000', '0202020202020202']
    """
    rng = random.Random(seed)
    step = max(1, len(runs) // max(1, count))
    lines = []
    for trace_id, root_id, answer in runs[::step][:count]:
        passes = len(json.loads(answer)[0]["parts"][0]["content"]) >= 50
        if rng.random() < 0.2:
            passes = not passes
        lines.append(json.dumps({"trace_id": trace_id.hex(), "span_id": root_id.hex(), "session_id": None,
                                 "name": LABEL_NAME, "value": passes, "annotator": "bench"}))
    return "\n".join(lines) + "\n"


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def config_knows(tree: Path, text: str) -> bool:
    """Whether a tree's configuration code mentions ``text`` (a key, a default): older daemons
    refuse keys they do not know."""
    config = [tree / "collector" / "config.py", *(tree / "collector" / "config").glob("*.py")]
    return any(path.exists() and text in path.read_text() for path in config)


def knows_decide_processes(tree: Path) -> bool:
    """Whether a tree's daemon has ``[assembly] decide_processes`` (older ones refuse the key)."""
    return config_knows(tree, "decide_processes")


def knows_worker_endpoint(tree: Path) -> bool:
    """Whether a tree's ``--role worker`` listens on ``[workers] http_endpoint`` (127.0.0.1:9464 by
    default; older workers listened on the receiver's ``http_endpoint``)."""
    return config_knows(tree, "9464")


def child_pids(pid: int) -> list[int]:
    """A process's children (a daemon's decision processes and multiprocessing's helper)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Backend(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP/gRPC trace backend recording when each score span arrived (by scored trace)."""

    def __init__(self) -> None:
        self.arrived: dict[bytes, float] = {}
        self.received = 0

    async def Export(self, request, context):  # noqa: N802
        now = time.perf_counter()
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    if span.name.startswith("evaluation "):
                        self.received += 1
                        self.arrived.setdefault(span.trace_id, now)
        return trace_service_pb2.ExportTraceServiceResponse()


async def wait_ready(session: aiohttp.ClientSession, port: int, proc: asyncio.subprocess.Process) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.returncode is not None:
            raise SystemExit(f"a daemon process exited during start ({proc.returncode}); see its log")
        try:
            async with session.get(f"http://127.0.0.1:{port}/readyz") as resp:
                if resp.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.05)
    raise SystemExit("a daemon process was not ready after 60 s")


async def redis_pids(url: str, prefix: str, partitions: int) -> dict[str, int]:
    """The Redis servers holding the deployment's keys, by name: the process id of each
    (they must run on this machine for their CPU to be read).

    On one server (or Sentinel) that is the one server, ``redis``. On a Cluster
    (``redis+cluster://``), the primary serving each hash slot the deployment uses: its own
    keys' slot and, with ``partitions`` above 1, every partition's; one primary is named
    ``redis`` as on one server, several ``redis@PORT`` (distinct processes, by port).
    """
    store = open_redis_store(url, partitions=partitions, key_prefix=prefix)
    client: Any = store.client
    holders: list[RedisStore] = ([store.home, *store.partitions] if isinstance(store, PartitionedRedisStore)
                                 else [store])
    found: dict[int, int | None] = {}  # pid -> the primary's port (None: not a Cluster)
    try:
        for holder in holders:
            node = await slot_primary(client, holder.keys.jobs)
            info = await client.info("server", **({} if node is None else {"target_nodes": node}))
            found.setdefault(int(info["process_id"]), None if node is None else int(node.port))
    finally:
        await store.shutdown()
    if len(found) == 1:
        return {"redis": next(iter(found))}
    return {f"redis@{port}": pid for pid, port in sorted(found.items(), key=lambda item: item[1] or 0)}


def write_config(folder: Path, name: str, store: str, redis_url: str, prefix: str, backend_port: int,
                 decision_wait: float, concurrency: int, partitions: int = 1,
                 decide_processes: int = 0, worker_endpoint: bool = False, labels: str | None = None,
                 labels_poll_s: float = 5.0) -> tuple[Path, int]:
    """A daemon's config file: HTTP receiver on a free port (``worker_endpoint``: a worker's own
    listener, ``[workers] http_endpoint``, on it too), the store (on Redis, over ``partitions``
    key partitions), its traces read in ``decide_processes`` processes, export to the backend;
    ``labels``: ``"off"`` keeps no score for agreement (``[labels] keep_scores = 0``), ``"on"``
    (and ``"preloaded"``) keeps them (the default ``keep_scores``) and measures agreement every
    ``labels_poll_s``.
    Defaults are left out (``partitions = 1``, ``decide_processes = 0``, no ``[labels]``), so a
    ``--compare`` revision older than a setting still reads the file."""
    port = free_port()
    path = folder / f"{name}.toml"
    queue = (f'url = "{redis_url}"\nkey_prefix = "{prefix}"\n' if store == "redis"
             else f'url = "sqlite:///{folder / (prefix.rstrip(":") + ".db")}"\n')
    if partitions != 1:
        queue += f"partitions = {partitions}\n"
    workers = f'http_endpoint = "127.0.0.1:{port}"\n' if worker_endpoint else ""
    on = f"[labels]\npoll_s = {labels_poll_s}\n"
    section = {None: "", "off": "[labels]\nkeep_scores = 0\n", "on": on, "preloaded": on}
    path.write_text(
        f'[receiver]\ngrpc_endpoint = ""\nhttp_endpoint = "127.0.0.1:{port}"\n'
        f'[assembly]\ndecision_wait = {decision_wait}\n'
        f'{f"decide_processes = {decide_processes}" if decide_processes else ""}\n'
        f'[queue]\n{queue}max_pending_jobs = 10000000\n'
        f'[workers]\nconcurrency = {concurrency}\n{workers}'
        f'[export]\nendpoint = "http://127.0.0.1:{backend_port}"\nforward_spans = false\n'
        f'{section[labels]}'
        f'[[scorers]]\nref = "{folder / "bench_scorers.py"}:length"\n'
    )
    return path, port


async def import_labels(python: str, tree: Path, env: dict[str, str], config: Path, path: Path) -> None:
    """``tracescore labels import`` of ``path`` into the deployment of ``config`` (before its
    daemons start: outside the measured window)."""
    proc = await asyncio.create_subprocess_exec(python, "-m", "collector.cli", "labels", "import", str(path),
                                                "--config", str(config), cwd=tree, env=env,
                                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, err = await proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"labels import failed ({proc.returncode}): {err.decode().strip()}")


async def agreement_seen(session: aiohttp.ClientSession, port: int, started_wall: float) -> dict[str, Any]:
    """What the daemon on ``port`` last measured (``/status``: its ``labels`` summary): the bench
    scorer's ``n`` (runs with a score and a label) and ``n_scored``, and when, in seconds after
    the load began (negative: not during the round)."""
    async with session.get(f"http://127.0.0.1:{port}/status") as resp:
        own = (await resp.json())["replicas"][0]
    summary = own.get("labels") or {}
    series = [s for s in summary.get("series", []) if s["scorer"] == LABEL_NAME]
    return {"n": sum(s["n"] for s in series), "n_scored": sum(s["n_scored"] for s in series),
            "measured_s": (summary.get("measured_at") or 0.0) - started_wall}


async def wait_scored(backend: Backend, runs: int, timeout_s: float) -> None:
    """Until the backend has the scores of ``runs`` runs (at most ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while len(backend.arrived) < runs:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {len(backend.arrived)} of {runs} runs scored within {timeout_s:g} s")
        await asyncio.sleep(0.01)


async def wait_measured(session: aiohttp.ClientSession, ports: list[int], timeout_s: float = 120) -> None:
    """Until every daemon process (``/status`` on each port) measured agreement over pairs: its
    first measure with pairs imports scipy and scikit-learn, a cost of its first minutes only."""
    deadline = time.monotonic() + timeout_s
    for port in ports:
        while (await agreement_seen(session, port, 0.0))["n"] == 0:
            if time.monotonic() > deadline:
                raise SystemExit(f"the daemon on port {port} measured no agreement within {timeout_s:g} s")
            await asyncio.sleep(0.2)


async def run_round(args: argparse.Namespace, tree: Path, python: str, workers: int, folder: Path,
                    runs_wanted: int, rate: float | None, labels: str | None = None) -> dict[str, Any]:
    """One round on the daemon of ``tree``: start it, post the runs, wait for every score, stop it.
    ``labels`` (`write_config`): ``"on"`` also imports labels of `label_lines` before the start;
    ``"preloaded"`` is ``"on"`` with the daemons started through `PRELOADED`."""
    measures = labels in ("on", "preloaded")
    prefix = f"bench-{uuid.uuid4().hex[:10]}:"
    backend = Backend()
    server = grpc.aio.server()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(backend, server)
    backend_port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(tree)}
    procs: list[asyncio.subprocess.Process] = []
    ports: list[int] = []
    roles = ([("serve", "all")] if args.store == "sqlite"
             else [("receiver", "receiver")] + [(f"worker{i}", "worker") for i in range(workers)])
    made = [make_request(args.traces_per_request, varied=labels is not None)
            for _ in range(runs_wanted // args.traces_per_request)]
    requests = [(body, ids) for body, ids, _ in made]
    warm = [make_request(args.traces_per_request, varied=labels is not None)
            for _ in range(args.warmup // args.traces_per_request)]
    warm_runs = [run for _, _, runs in warm for run in runs]
    for name, role in roles:
        config, port = write_config(folder, name, args.store, args.redis_url, prefix, backend_port,
                                    args.decision_wait, args.concurrency, args.partitions,
                                    args.decide_processes if name in ("serve", "receiver") and knows_decide_processes(tree)
                                    else 0, worker_endpoint=role == "worker" and knows_worker_endpoint(tree),
                                    labels=labels, labels_poll_s=args.labels_poll_s)
        if measures and not procs:  # the deployment's labels, before its first process starts
            path = folder / f"{prefix.rstrip(':')}-labels.jsonl"
            path.write_text((label_lines(warm_runs, len(warm_runs)) if warm_runs else "")
                            + label_lines([run for _, _, runs in made for run in runs], args.labels_count))
            await import_labels(python, tree, env, config, path)
        role_args = ["--role", role] if role != "all" else []
        with (folder / f"{name}.log").open("wb") as log:
            command = ["-m", "collector.cli", "serve", "--config", str(config), *role_args]
            if args.profile:  # the main thread's CPU time (thread_time), written when serve returns
                out = Path(args.profile) / f"{labels or ''}{name}.prof"
                command = ["-c", PROFILED.format(out=str(out)), *command[2:]]
            elif labels == "preloaded":
                command = ["-c", PRELOADED, *command[2:]]
            procs.append(await asyncio.create_subprocess_exec(python, *command, cwd=tree, env=env, stderr=log))
        ports.append(port)
    runs = len(requests) * args.traces_per_request
    acked: dict[bytes, float] = {}
    url = f"http://127.0.0.1:{ports[0]}/v1/traces"
    try:
        async with aiohttp.ClientSession() as session:
            await asyncio.gather(*(wait_ready(session, p, proc) for p, proc in zip(ports, procs, strict=True)))

            async def send(body: bytes) -> float:
                """Post one request until it is accepted; when it was."""
                for _ in range(100):
                    async with session.post(url, data=body, headers={"Content-Type": "application/x-protobuf"}) as resp:
                        await resp.read()
                        if resp.status == 200:
                            return time.perf_counter()
                    await asyncio.sleep(0.1)
                raise SystemExit("a request was refused 100 times")

            if warm:  # before the measured load: every process's first scores, and its first agreement
                await asyncio.gather(*(send(body) for body, _, _ in warm))
                await wait_scored(backend, len(warm_runs), 120)
                if measures:
                    await wait_measured(session, ports)
            queue = list(reversed(list(enumerate(requests))))

            async def client() -> None:
                while queue:
                    k, (body, ids) = queue.pop()
                    if rate:  # paced: request k leaves at its slot
                        await asyncio.sleep(max(0.0, started + k * args.traces_per_request / rate
                                                - time.perf_counter()))
                    now = await send(body)
                    acked.update((t, now) for t in ids)

            pids = {name: proc.pid for (name, _), proc in zip(roles, procs, strict=True)}
            for name, proc in zip([n for n, _ in roles], procs, strict=True):  # decision processes
                pids.update({f"{name}-child{i}": child for i, child in enumerate(child_pids(proc.pid))})
            if args.store == "redis":  # the Redis servers' CPU is part of the cost too (last)
                pids.update(await redis_pids(args.redis_url, prefix, args.partitions))
            pids["client"] = os.getpid()  # this process: the load client and the OTLP backend
            cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
            started, started_wall = time.perf_counter(), time.time()
            await asyncio.gather(*(client() for _ in range(args.concurrency_clients)))
            ingest_s = time.perf_counter() - started
            await wait_scored(backend, len(warm_runs) + runs, 600)
            cpu = {name: cpu_seconds(pid) - cpu0[name] for name, pid in pids.items()}
            seen = await agreement_seen(session, ports[0], started_wall) if measures else None
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
        await asyncio.gather(*(proc.wait() for proc in procs))
        await server.stop(0.5)
        if args.store == "redis":
            store = open_redis_store(args.redis_url, partitions=args.partitions, key_prefix=prefix)
            await store.delete_all()
            await store.shutdown()
    last = max(backend.arrived.values())
    latencies = sorted(backend.arrived[t] - acked[t] for t in acked)
    return {
        "agreement": seen, "runs": runs, "ingest_s": ingest_s, "total_s": last - started, "runs_per_s": runs / (last - started),
        "p50_ms": statistics.median(latencies) * 1e3,
        "p99_ms": latencies[max(0, int(len(latencies) * 0.99) - 1)] * 1e3,
        "resent": backend.received - len(backend.arrived),
        # per run, per process by name (receiver, workers, then the Redis server(s))
        "cpu_ms": {name: c * 1e3 / runs for name, c in cpu.items()},
    }


def median_of(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The per-figure median of several rounds of one configuration."""
    out = {k: statistics.median(r[k] for r in rounds) for k in ("runs_per_s", "p50_ms", "p99_ms", "total_s",
                                                                   "ingest_s")}
    out["runs"] = rounds[0]["runs"]
    seen = [r["agreement"] for r in rounds if r.get("agreement") is not None]
    if seen:  # labels on: what the agreement watch measured last, each round
        out["agreement"] = {"n": statistics.median(a["n"] for a in seen),
                            "n_scored": statistics.median(a["n_scored"] for a in seen),
                            "during": sum(a["measured_s"] >= 0 for a in seen), "rounds": len(seen)}
    out["resent"] = max(r["resent"] for r in rounds)
    # Each process over the rounds it ran in: which Cluster primaries serve a deployment's
    # slots may change from round to round (a fresh key prefix each), so their sum is kept too.
    names = list(dict.fromkeys(name for r in rounds for name in r["cpu_ms"]))
    out["cpu_ms"] = {name: statistics.median(r["cpu_ms"][name] for r in rounds if name in r["cpu_ms"])
                     for name in names}
    if sum(name.startswith("redis@") for name in names) > 1:
        out["cpu_ms"]["redis-sum"] = statistics.median(
            sum(c for name, c in r["cpu_ms"].items() if name.startswith("redis@")) for r in rounds)
    return out


def cpu_ceiling(cpu_ms: dict[str, float], cpus: int) -> float:
    """The runs/s that the measured CPU per run allows at best: every process's CPU within the
    machine's ``cpus``, and each daemon's (its children apart) within one CPU, its interpreter
    lock's bound.

    Example:
        >>> round(cpu_ceiling({"receiver": 0.25, "worker0": 0.25, "redis": 0.1, "client": 0.05}, 2))
        3077
        >>> round(cpu_ceiling({"serve": 0.5, "serve-child1": 0.2, "client": 0.05}, 2))
        2000
    """
    spent = {name: c for name, c in cpu_ms.items() if name != "redis-sum"}
    bound = cpus * 1000 / sum(spent.values())
    for name, c in spent.items():
        if c > 0 and not name.startswith(("redis", "client")) and "-child" not in name:
            bound = min(bound, 1000 / c)
    return bound


def describe(r: dict[str, Any], store: str, offered_at_once: bool = False) -> str:
    """One line of figures: throughput, latency, CPU per run per process; with every run offered
    at once, also the ceiling that CPU allows (`cpu_ceiling`) and the share of it reached."""
    cpu = " ".join(f"{name} {c:.2f}" for name, c in r["cpu_ms"].items())
    line = (f"{r['runs_per_s']:6.0f} runs/s ({r['runs']} runs in {r['total_s']:.2f} s)  received->exported "
            f"p50 {r['p50_ms']:.0f} ms p99 {r['p99_ms']:.0f} ms  re-sent {r['resent']}  CPU ms/run {cpu}")
    if offered_at_once:
        ceiling = cpu_ceiling(r["cpu_ms"], os.cpu_count() or 1)
        line += f"  CPU ceiling {ceiling:.0f} runs/s (reached {r['runs_per_s'] / ceiling:.0%})"
    if r.get("agreement"):
        a = r["agreement"]
        line += (f"  agreement: n {a['n']:.0f} of {a['n_scored']:.0f} scored, last measured during the load "
                 f"in {a['during']} of {a['rounds']} rounds")
    return line


def tree_python(rev: str, tree: Path, env: str) -> str:
    """The interpreter a compared tree runs with: this virtualenv (``shared``), or a virtualenv
    of its own with the dependencies its own pyproject.toml asks for (``own``: the tree as it
    shipped), made once per revision in ~/.cache/tracescore/bench-venvs."""
    if env == "shared":
        return sys.executable
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", rev], capture_output=True, text=True,
                         check=True).stdout.strip()
    venv = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tracescore" / "bench-venvs" / sha[:12]
    python = venv / "bin" / "python"
    if not (venv / ".installed").exists():
        print(f"making a virtualenv for {rev} in {venv} (its own dependencies)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", str(tree)], check=True)
        (venv / ".installed").touch()
    return str(python)


def worktree(rev: str) -> Path:
    """A temporary worktree of ``rev`` (removed by `remove_worktree`)."""
    path = Path(tempfile.mkdtemp(prefix=f"tracescore-{rev[:12]}-"))
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(path), rev], check=True)
    return path


def remove_worktree(path: Path) -> None:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], check=False)


Variant = tuple[Path, str, str | None]
"""What a round runs: a tree, its interpreter, and its ``[labels]`` (`write_config`: None, "off", "on")."""


def worker_cpu(r: dict[str, Any], store: str) -> float:
    """The (first) worker's CPU per run, with its children's (on SQLite: the one ``serve``)."""
    w = "serve" if store == "sqlite" else "worker0"
    return sum(c for name, c in r["cpu_ms"].items() if name == w or name.startswith(f"{w}-child"))


def all_cpu(r: dict[str, Any]) -> float:
    """Every process's CPU per run: daemons, their children, Redis, and the bench's client."""
    return sum(c for name, c in r["cpu_ms"].items() if name != "redis-sum")


async def compare(args: argparse.Namespace, variants: dict[str, Variant], folder: Path, title: str,
                  runs: int, rate: float | None, workers: int) -> None:
    """Run one configuration ``args.rounds`` times on every variant, interleaved (the order
    alternates round by round, so none always runs first); print medians and each variant's
    figures over the last one's: the ratio of the medians, then each round's ratio."""
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    for k in range(args.rounds):
        for name in (list(variants) if k % 2 == 0 else list(reversed(variants))):
            tree, python, labels = variants[name]
            results[name].append(await run_round(args, tree, python, workers, folder, runs, rate, labels))
    medians = {name: median_of(rounds) for name, rounds in results.items()}
    print(f"  {title}")
    for name, r in medians.items():
        print(f"    {name:>10}: {describe(r, args.store, offered_at_once=rate is None)}")
    *firsts, b = medians
    old = medians[b]
    for a in firsts:  # each against the last (this tree against REV; labels on against off)
        here = medians[a]
        pairs = list(zip(results[a], results[b], strict=True))
        print(f"    {f'{a} / {b}' if len(firsts) > 1 else 'ratio':>10}: runs/s x{here['runs_per_s'] / old['runs_per_s']:.2f}  p99 "
              f"x{here['p99_ms'] / old['p99_ms']:.2f}  worker CPU/run "
              f"x{worker_cpu(here, args.store) / worker_cpu(old, args.store):.2f}"
              f"  all CPU/run x{all_cpu(here) / all_cpu(old):.2f}"
              f"  (p99 - decision_wait: {here['p99_ms'] - args.decision_wait * 1e3:.0f} ms {a}, "
              f"{old['p99_ms'] - args.decision_wait * 1e3:.0f} ms {b})")
        if args.rounds > 1:
            def each(figure: Any, pairs: list[tuple[dict[str, Any], dict[str, Any]]] = pairs) -> str:
                return " ".join(f"{figure(x) / figure(y):.2f}" for x, y in pairs)
            print(f"    {'per round':>10}: runs/s {each(lambda r: r['runs_per_s'])}; p99 {each(lambda r: r['p99_ms'])}; "
                  f"worker CPU/run {each(lambda r: worker_cpu(r, args.store))}; all CPU/run {each(all_cpu)}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["redis", "sqlite"], default="redis")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--runs", type=int, default=4000)
    parser.add_argument("--traces-per-request", type=int, default=20)
    parser.add_argument("--concurrency-clients", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=64, help="jobs in flight per worker process")
    parser.add_argument("--decision-wait", type=float, default=0.2)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker processes (Redis only)")
    parser.add_argument("--partitions", type=int, default=1,
                        help="[queue] partitions of every daemon, and of the store the bench opens (Redis only)")
    parser.add_argument("--decide-processes", type=int, default=0,
                        help="[assembly] decide_processes of the daemon that decides (serve or receiver)")
    parser.add_argument("--rates", type=float, nargs="*", default=[300.0, 1000.0],
                        help="runs/s offered in the latency rounds (below capacity)")
    parser.add_argument("--rate-seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=1, help="rounds per configuration (medians printed)")
    parser.add_argument("--compare", metavar="REV", help="also run every round on a worktree of REV")
    parser.add_argument("--compare-env", choices=["own", "shared"], default="own",
                        help="REV runs in a virtualenv of its own dependencies (own: as it shipped) or in "
                             "this one (shared)")
    parser.add_argument("--labels", action="store_true",
                        help="run every round twice, interleaved: judge agreement on (labels imported, scores "
                             "kept, agreement measured every --labels-poll-s) and off ([labels] keep_scores = 0); "
                             "ratios on / off")
    parser.add_argument("--labels-poll-s", type=float, default=5.0,
                        help="[labels] poll_s of the 'labels on' daemons (how often agreement is measured)")
    parser.add_argument("--labels-count", type=int, default=300, help="labels imported for a round's runs")
    parser.add_argument("--labels-preloaded", action="store_true",
                        help="with --labels, a third variant: labels on, the daemons started by a script that "
                             "imports numpy, scipy.stats and sklearn.metrics before the daemon (so its gc.freeze "
                             "at start keeps them out of the collector's walks)")
    parser.add_argument("--warmup", type=int, default=0, metavar="RUNS",
                        help="runs posted and scored before each round's measured load (with --labels, each "
                             "labelled, and the load waits for every process's first agreement over them)")
    parser.add_argument("--profile", metavar="DIR", help="run each daemon under cProfile (its main thread), "
                        "writing DIR/<process>.prof at exit (figures are then not comparable)")
    args = parser.parse_args()
    if args.store == "sqlite":
        args.workers = [1]
        if args.partitions != 1:
            parser.error("--partitions needs --store redis")
    if args.labels and args.compare:
        parser.error("--labels compares this tree with itself: leave out --compare")
    folder = Path(tempfile.mkdtemp(prefix="tracescore-scale-"))
    (folder / "bench_scorers.py").write_text(SCORER)
    trees: dict[str, Variant] = {"this tree": (ROOT, sys.executable, None)}
    if args.labels:
        trees = {"labels on": (ROOT, sys.executable, "on"), "labels off": (ROOT, sys.executable, "off")}
        if args.labels_preloaded:
            trees = {"labels on": trees["labels on"], "preloaded": (ROOT, sys.executable, "preloaded"),
                     "labels off": trees["labels off"]}
    if args.compare:
        old = worktree(args.compare)
        trees[args.compare] = (old, tree_python(args.compare, old, args.compare_env), None)
    try:
        print(f"{args.store} store; {args.runs} runs in requests of {args.traces_per_request}, "
              f"{args.concurrency_clients} clients; decision_wait {args.decision_wait} s; worker concurrency "
              f"{args.concurrency}; {os.cpu_count()} CPUs shared by every process; {args.rounds} round(s), "
              f"{args.compare or 'no'} comparison ({args.compare_env} virtualenv); "
              f"{f'{args.partitions} partitions; ' if args.partitions != 1 else ''}"
              f"{f'decide_processes {args.decide_processes}; ' if args.decide_processes else ''}"
              f"{f'labels on/off: {args.labels_count} labels imported a round, poll_s {args.labels_poll_s:g}; ' if args.labels else ''}"
              f"{f'{args.warmup} warm-up runs a round; ' if args.warmup else ''}"
              f"medians; process logs in {folder}")
        for workers in args.workers:
            what = "serve (one process)" if args.store == "sqlite" else f"{workers} worker(s)"
            await compare(args, trees, folder, f"throughput, every run offered at once; {what}",
                          args.runs, None, workers)
        for rate in args.rates:
            for workers in args.workers[:1]:
                await compare(args, trees, folder, f"latency, {rate:.0f} runs/s offered for {args.rate_seconds:.0f} s",
                              int(rate * args.rate_seconds), rate, workers)
    finally:
        for tree, _, _ in trees.values():
            if tree != ROOT:
                remove_worktree(tree)


if __name__ == "__main__":
    asyncio.run(main())
