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

Every process (client, receiver, workers, Redis) shares this machine's cores, so the
2-worker figure is bounded by the CPUs left, not by the queue.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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
MESSAGES_IN = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "What is the capital of France?"}]}])
MESSAGES_OUT = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Paris."}]}])


def _kv(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def make_request(traces: int) -> tuple[bytes, list[bytes]]:
    """One request with ``traces`` fresh agent traces, and their trace ids."""
    spans, ids = [], []
    now = time.time_ns()
    for _ in range(traces):
        trace_id, root_id, chat_id = secrets.token_bytes(16), secrets.token_bytes(8), secrets.token_bytes(8)
        ids.append(trace_id)
        messages = [_kv("gen_ai.input.messages", MESSAGES_IN), _kv("gen_ai.output.messages", MESSAGES_OUT)]
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
    return body, ids


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def knows_decide_processes(tree: Path) -> bool:
    """Whether a tree's daemon has ``[assembly] decide_processes`` (older ones refuse the key)."""
    config = [tree / "collector" / "config.py", *(tree / "collector" / "config").glob("*.py")]
    return any(path.exists() and "decide_processes" in path.read_text() for path in config)


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
                 decide_processes: int = 0) -> tuple[Path, int]:
    """A daemon's config file: HTTP receiver on a free port, the store (on Redis, over
    ``partitions`` key partitions), its traces read in ``decide_processes`` processes, export
    to the backend. Defaults are left out (``partitions = 1``, ``decide_processes = 0``), so a
    ``--compare`` revision older than a setting still reads the file."""
    port = free_port()
    path = folder / f"{name}.toml"
    queue = (f'url = "{redis_url}"\nkey_prefix = "{prefix}"\n' if store == "redis"
             else f'url = "sqlite:///{folder / (prefix.rstrip(":") + ".db")}"\n')
    if partitions != 1:
        queue += f"partitions = {partitions}\n"
    path.write_text(
        f'[receiver]\ngrpc_endpoint = ""\nhttp_endpoint = "127.0.0.1:{port}"\n'
        f'[assembly]\ndecision_wait = {decision_wait}\n'
        f'{f"decide_processes = {decide_processes}" if decide_processes else ""}\n'
        f'[queue]\n{queue}max_pending_jobs = 10000000\n'
        f'[workers]\nconcurrency = {concurrency}\n'
        f'[export]\nendpoint = "http://127.0.0.1:{backend_port}"\nforward_spans = false\n'
        f'[[scorers]]\nref = "{folder / "bench_scorers.py"}:length"\n'
    )
    return path, port


async def run_round(args: argparse.Namespace, tree: Path, python: str, workers: int, folder: Path,
                    runs_wanted: int, rate: float | None) -> dict[str, Any]:
    """One round on the daemon of ``tree``: start it, post the runs, wait for every score, stop it."""
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
    for name, role in roles:
        config, port = write_config(folder, name, args.store, args.redis_url, prefix, backend_port,
                                    args.decision_wait, args.concurrency, args.partitions,
                                    args.decide_processes if name in ("serve", "receiver") and knows_decide_processes(tree)
                                    else 0)
        role_args = ["--role", role] if role != "all" else []
        with (folder / f"{name}.log").open("wb") as log:
            command = ["-m", "collector.cli", "serve", "--config", str(config), *role_args]
            if args.profile:  # the main thread's CPU time (thread_time), written when serve returns
                out = Path(args.profile) / f"{name}.prof"
                command = ["-c", PROFILED.format(out=str(out)), *command[2:]]
            procs.append(await asyncio.create_subprocess_exec(python, *command, cwd=tree, env=env, stderr=log))
        ports.append(port)
    requests = [make_request(args.traces_per_request) for _ in range(runs_wanted // args.traces_per_request)]
    runs = len(requests) * args.traces_per_request
    acked: dict[bytes, float] = {}
    url = f"http://127.0.0.1:{ports[0]}/v1/traces"
    try:
        async with aiohttp.ClientSession() as session:
            await asyncio.gather(*(wait_ready(session, p, proc) for p, proc in zip(ports, procs, strict=True)))
            queue = list(reversed(list(enumerate(requests))))

            async def client() -> None:
                while queue:
                    k, (body, ids) = queue.pop()
                    if rate:  # paced: request k leaves at its slot
                        await asyncio.sleep(max(0.0, started + k * args.traces_per_request / rate
                                                - time.perf_counter()))
                    for _ in range(100):
                        async with session.post(url, data=body,
                                                headers={"Content-Type": "application/x-protobuf"}) as resp:
                            await resp.read()
                            if resp.status == 200:
                                now = time.perf_counter()
                                acked.update((t, now) for t in ids)
                                break
                        await asyncio.sleep(0.1)
                    else:
                        raise SystemExit("a request was refused 100 times")

            pids = {name: proc.pid for (name, _), proc in zip(roles, procs, strict=True)}
            for name, proc in zip([n for n, _ in roles], procs, strict=True):  # decision processes
                pids.update({f"{name}-child{i}": child for i, child in enumerate(child_pids(proc.pid))})
            if args.store == "redis":  # the Redis servers' CPU is part of the cost too (last)
                pids.update(await redis_pids(args.redis_url, prefix, args.partitions))
            pids["client"] = os.getpid()  # this process: the load client and the OTLP backend
            cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
            started = time.perf_counter()
            await asyncio.gather(*(client() for _ in range(args.concurrency_clients)))
            ingest_s = time.perf_counter() - started
            deadline = time.monotonic() + 600
            while len(backend.arrived) < runs:
                if time.monotonic() > deadline:
                    raise SystemExit(f"only {len(backend.arrived)} of {runs} runs scored within 600 s")
                await asyncio.sleep(0.01)
            cpu = {name: cpu_seconds(pid) - cpu0[name] for name, pid in pids.items()}
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
        "runs": runs, "ingest_s": ingest_s, "total_s": last - started, "runs_per_s": runs / (last - started),
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


async def compare(args: argparse.Namespace, trees: dict[str, tuple[Path, str]], folder: Path, title: str,
                  runs: int, rate: float | None, workers: int) -> None:
    """Run one configuration ``args.rounds`` times on every tree, interleaved; print medians and ratios."""
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, (tree, python) in trees.items():
            results[name].append(await run_round(args, tree, python, workers, folder, runs, rate))
    medians = {name: median_of(rounds) for name, rounds in results.items()}
    print(f"  {title}")
    for name, r in medians.items():
        print(f"    {name:>10}: {describe(r, args.store, offered_at_once=rate is None)}")
    if len(trees) == 2:
        here, old = medians["this tree"], medians[next(n for n in trees if n != "this tree")]
        w = "serve" if args.store == "sqlite" else "worker0"  # the (first) worker's CPU, with its children's

        def cpu(r: dict[str, Any]) -> float:
            return sum(c for name, c in r["cpu_ms"].items() if name == w or name.startswith(f"{w}-child"))
        print(f"    {'ratio':>10}: runs/s x{here['runs_per_s'] / old['runs_per_s']:.2f}  p99 "
              f"x{here['p99_ms'] / old['p99_ms']:.2f}  worker CPU/run x{cpu(here) / cpu(old):.2f}"
              f"  (p99 - decision_wait: {here['p99_ms'] - args.decision_wait * 1e3:.0f} ms here, "
              f"{old['p99_ms'] - args.decision_wait * 1e3:.0f} ms there)")


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
    parser.add_argument("--profile", metavar="DIR", help="run each daemon under cProfile (its main thread), "
                        "writing DIR/<process>.prof at exit (figures are then not comparable)")
    args = parser.parse_args()
    if args.store == "sqlite":
        args.workers = [1]
        if args.partitions != 1:
            parser.error("--partitions needs --store redis")
    folder = Path(tempfile.mkdtemp(prefix="tracescore-scale-"))
    (folder / "bench_scorers.py").write_text(SCORER)
    trees = {"this tree": (ROOT, sys.executable)}
    if args.compare:
        old = worktree(args.compare)
        trees[args.compare] = (old, tree_python(args.compare, old, args.compare_env))
    try:
        print(f"{args.store} store; {args.runs} runs in requests of {args.traces_per_request}, "
              f"{args.concurrency_clients} clients; decision_wait {args.decision_wait} s; worker concurrency "
              f"{args.concurrency}; {os.cpu_count()} CPUs shared by every process; {args.rounds} round(s), "
              f"{args.compare or 'no'} comparison ({args.compare_env} virtualenv); "
              f"{f'{args.partitions} partitions; ' if args.partitions != 1 else ''}"
              f"{f'decide_processes {args.decide_processes}; ' if args.decide_processes else ''}"
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
        for name, (tree, _) in trees.items():
            if name != "this tree":
                remove_worktree(tree)


if __name__ == "__main__":
    asyncio.run(main())
