"""Figures of issue 13 (reliability under faults and abuse), for a tree before and after.

Each scenario starts real ``tracescore serve`` processes of the tree given with ``--repo``
(default: this one; e.g. a clone checked out at an older commit, run with this venv),
drives them over loopback sockets and prints one line of figures:

    .venv/bin/python bench/faults.py [--repo DIR] [--compare REV]... SCENARIO...

``--compare REV`` (repeatable) also runs each scenario against the daemon of commit
``REV``, checked out with ``git worktree add`` into a temporary directory (removed
afterwards) and run the same way (``python -m collector.cli serve`` with its cwd and
PYTHONPATH at that tree): both lines are printed, and for the scenarios that report
figures (``memory``) the ratio of each figure, this tree's over REV's.

* ``disk``: the store on a 24 MiB tmpfs (needs root) filled mid-load: statuses while
  full, runs scored once space returns (no restart), "trace decision failed" log lines;
* ``bytes``: 4 clients posting 16 MiB bodies for 20 s: bytes buffered on disk;
* ``worker``: Redis, two workers, 200 runs of a 0.5 s scorer, one worker SIGKILLed:
  seconds until every run is scored, runs scored twice, spans sent twice;
* ``conns``: ``ulimit -n 1024``, 1,100 slow connections: a normal client's latency (or
  failure), log bytes written in 30 s;
* ``flood``: 20 pending runs, then one request of 100,000 trace ids: runs lost;
* ``memory``: RSS with 4 and 8 gRPC clients sending 5 bodies of 16 MiB each without the
  token, with it (each client retries refusals, honouring their RetryInfo, until its 5
  bodies are accepted; the line counts them), and 10 s after the burst;
* ``gzip``: a two-member gzip body and a gzip body with trailing garbage: status and spans;
* ``maxspans``: a run span after its trace reached max_spans_per_trace: scored or not;
* ``json``: statuses of malformed OTLP/JSON bodies, ERROR bytes logged for a 47-byte
  request, errors_total after mid-body disconnects.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import grpc

HERE = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(HERE / "tests" / "integration"), str(HERE / "tests" / "support")]
from daemon_harness import CaptureBackend, agent_trace_body, free_port  # noqa: E402
from google.rpc.error_details_pb2 import RetryInfo  # noqa: E402
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: E402
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span  # noqa: E402

PB = {"Content-Type": "application/x-protobuf"}
SCORER = '''
import time
from scorers import create_scorer
def _score(run):
    time.sleep(SLEEP)
    return 1.0
length = create_scorer(id="length", description="d", type="agent", version="1").generate_score(_score)
'''


class Daemon:
    """A ``tracescore serve`` of the tree under test."""

    def __init__(self, repo: Path, tmp: Path, name: str, config: str, *, role: str = "all",
                 open_files: int | None = None) -> None:
        self.repo, self.role, self.open_files = repo, role, open_files
        self.http, self.grpc = free_port(), free_port()
        self.log = tmp / f"{name}.log"
        self.config = tmp / f"{name}.toml"
        self.config.write_text(f'[receiver]\ngrpc_endpoint = "127.0.0.1:{self.grpc}"\n'
                               f'http_endpoint = "127.0.0.1:{self.http}"\nretry_after_s = 1.0\n{config}')
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http}/v1/traces"

    def knows(self, key: str) -> bool:
        """Whether the tree's configuration has ``key`` (older trees kept it in config.py)."""
        places = (self.repo / "collector" / "config" / "sections.py", self.repo / "collector" / "config.py")
        return any(key in p.read_text() for p in places if p.exists())

    async def start(self) -> Daemon:
        limit = self.open_files
        env = {**os.environ, "PYTHONPATH": str(self.repo), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        self.proc = await asyncio.to_thread(
            subprocess.Popen, [sys.executable, "-m", "collector.cli", "serve", "--config", str(self.config),
                               *(["--role", self.role] if self.role != "all" else [])],
            cwd=self.repo, env=env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
            preexec_fn=(lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))) if limit else None)
        await until(self.ready, 60)
        return self

    async def ready(self) -> bool:
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3)) as s:
                async with s.get(f"http://127.0.0.1:{self.http}/readyz") as r:
                    return r.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    def rss_mb(self) -> float:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


async def until(check: Callable[[], Awaitable[bool] | bool], timeout: float) -> bool:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if not isinstance(value, bool):
            value = await value
        if value:
            return True
        await asyncio.sleep(0.1)
    return False


async def post(session: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str] = PB) -> int:
    try:
        async with session.post(url, data=body, headers=headers) as resp:
            await resp.read()
            return resp.status
    except (aiohttp.ClientError, TimeoutError):
        return 0


def base_config(tmp: Path, backend: CaptureBackend, scorer: Path, extra: str = "") -> str:
    return (f'[assembly]\ndecision_wait = 0.3\n{extra}[queue]\nurl = "sqlite:///{tmp / "q" / "queue.db"}"\n'
            f'[export]\nendpoint = "{backend.endpoint}"\ntimeout_s = 2.0\nmax_backoff_s = 0.5\n'
            f'forward_spans = false\n[[scorers]]\nref = "{scorer}:length"\n')


def scorer_file(tmp: Path, sleep_s: float = 0.0) -> Path:
    path = tmp / "bench_scorer.py"
    path.write_text(SCORER.replace("SLEEP", str(sleep_s)))
    return path


def padded_agent_body(pad: int) -> tuple[bytes, str]:
    """An agent run's request with a ``pad``-byte span in the same trace."""
    body, trace_id, _ = agent_trace_body()
    request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
    request.resource_spans[0].scope_spans[0].spans.add(
        trace_id=bytes.fromhex(trace_id), span_id=uuid.uuid4().bytes[:8], name="x" * pad)
    return request.SerializeToString(), trace_id


@contextlib.asynccontextmanager
async def scoring(repo: Path, tmp: Path, name: str, extra: str = "", head: str = "", wait: float = 0.3,
                  open_files: int | None = None, queue_dir: str = "") -> AsyncIterator[tuple[Daemon, CaptureBackend]]:
    """A started daemon of ``repo`` scoring every run (its queue in ``tmp/q/queue_dir``),
    exporting to a capture backend."""
    backend = await CaptureBackend().start()
    config = head + base_config(tmp, backend, scorer_file(tmp), extra).replace(
        "decision_wait = 0.3", f"decision_wait = {wait}").replace(
        str(tmp / "q" / "queue.db"), str(tmp / "q" / queue_dir / "queue.db"))
    daemon = Daemon(repo, tmp, name, config, open_files=open_files)
    try:
        await daemon.start()
        yield daemon, backend
    finally:
        daemon.stop()
        await backend.stop()


def scored(backend: CaptureBackend) -> set[str]:
    return {s.span.trace_id.hex() for s in backend.scores()}


async def disk(repo: Path, tmp: Path) -> str:
    vol = tmp / "q"
    vol.mkdir()
    await asyncio.to_thread(subprocess.run, ["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(vol)], check=True)
    try:
        async with scoring(repo, tmp, "disk") as (daemon, backend):
            accepted = set()
            async with aiohttp.ClientSession() as session:
                filler = vol / "filler"
                with filler.open("wb", buffering=0) as f:
                    try:
                        while f.write(b"\0" * 65536):
                            pass
                    except OSError:
                        pass
                # A little room comes back: bodies larger than it are written partly, then ENOSPC.
                os.truncate(filler, max(0, filler.stat().st_size - 200 * 1024))
                statuses: dict[int, int] = {}
                for _ in range(30):
                    body, trace_id = padded_agent_body(48 * 1024)
                    status = await post(session, daemon.url, body)
                    statuses[status] = statuses.get(status, 0) + 1
                    if status == 200:
                        accepted.add(trace_id)
                filler.unlink()
                await asyncio.sleep(2)
                for _ in range(20):
                    body, trace_id, _ = agent_trace_body()
                    if await post(session, daemon.url, body) == 200:
                        accepted.add(trace_id)
            await until(lambda: scored(backend) >= accepted, 30)
            fails = daemon.log.read_text().count("trace decision failed")
            return (f"disk: statuses while full {statuses}; accepted runs scored after space returned "
                    f"{len(scored(backend) & accepted)}/{len(accepted)}; 'trace decision failed' lines {fails}")
    finally:
        await asyncio.to_thread(subprocess.run, ["umount", "-l", str(vol)], check=False)


async def bytes_(repo: Path, tmp: Path) -> str:
    cap = "max_buffer_bytes = 536870912\n" if Daemon(repo, tmp, "probe", "").knows("max_buffer_bytes") else ""
    body = big_body(16 * 1024 * 1024 - 4096)
    statuses: dict[int, int] = {}
    async with scoring(repo, tmp, "bytes", cap, wait=60) as (daemon, _):
        async def client() -> None:
            async with aiohttp.ClientSession() as session:
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    status = await post(session, daemon.url, body)
                    statuses[status] = statuses.get(status, 0) + 1
                    if status != 200:
                        await asyncio.sleep(0.2)

        await asyncio.gather(*(client() for _ in range(4)))
        on_disk = sum(p.stat().st_size for p in (tmp / "q").rglob("*") if p.is_file())
        return f"bytes: 4 clients x 16 MiB bodies for 20 s: {on_disk / 2**20:.0f} MiB on disk; statuses {statuses} ({cap.strip() or 'no cap'})"


def big_body(size: int) -> bytes:
    span = Span(trace_id=uuid.uuid4().bytes, span_id=b"\x01" * 8, name="x" * size)
    return trace_service_pb2.ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[span])])]).SerializeToString()


async def worker(repo: Path, tmp: Path) -> str:
    prefix = f"bench-{uuid.uuid4().hex[:8]}:"
    backend = await CaptureBackend().start()
    path = scorer_file(tmp, 0.5)
    config = (f'[assembly]\ndecision_wait = 0.2\n[queue]\nurl = "redis://127.0.0.1:6379/0"\nkey_prefix = "{prefix}"\n'
              f'[workers]\nconcurrency = 64\n[export]\nendpoint = "{backend.endpoint}"\ntimeout_s = 2.0\n'
              f'max_backoff_s = 0.5\nforward_spans = false\n[[scorers]]\nref = "{path}:length"\n')
    procs = [Daemon(repo, tmp, "receiver", config, role="receiver"),
             Daemon(repo, tmp, "w1", config, role="worker"), Daemon(repo, tmp, "w2", config, role="worker")]
    try:
        await procs[0].start()
        await procs[1].start()
        expected = set()
        async with aiohttp.ClientSession() as session:
            for _ in range(200):
                body, trace_id, _ = agent_trace_body()
                await post(session, procs[0].url, body)
                expected.add(trace_id)
        await until(lambda: len(scored(backend)) >= 10, 30)
        procs[1].stop(signal.SIGKILL)
        killed = time.monotonic()
        await procs[2].start()
        done = await until(lambda: scored(backend) >= expected, 400)
        took = time.monotonic() - killed
        spans = [s.span.span_id for s in backend.scores()]
        per_trace: dict[str, int] = {}
        for s in {(s.span.trace_id.hex(), s.span.span_id) for s in backend.scores()}:
            per_trace[s[0]] = per_trace.get(s[0], 0) + 1
        return (f"worker: every run scored {took:.1f}s after the SIGKILL{'' if done else ' (NOT all: gave up)'}; "
                f"runs scored twice {sum(n > 1 for n in per_trace.values())}; spans re-sent with the same span id "
                f"{len(spans) - len(set(spans))}")
    finally:
        for p in procs:
            p.stop(signal.SIGKILL)
        await backend.stop()
        sys.path.insert(0, str(HERE))
        from collector.store.redis.store import RedisStore

        cleaner = RedisStore("redis://127.0.0.1:6379/0", key_prefix=prefix)
        await cleaner.delete_all()
        await cleaner.shutdown()


async def conns(repo: Path, tmp: Path) -> str:
    return "; ".join([await _conns(repo, tmp, n) for n in (1100, 1500)])


async def _conns(repo: Path, tmp: Path, slow: int) -> str:
    writers: list[asyncio.StreamWriter] = []
    async with scoring(repo, tmp, f"conns{slow}", open_files=1024, queue_dir=str(slow)) as (daemon, backend):
        try:
            size0 = daemon.log.stat().st_size
            async def connect(i: int) -> asyncio.StreamWriter | None:
                try:
                    _, w = await asyncio.wait_for(asyncio.open_connection(
                        "127.0.0.1", daemon.grpc if i % 10 == 0 else daemon.http), 2)
                    w.write(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n")
                    return w
                except (OSError, TimeoutError):
                    return None  # refused, or left in a full backlog

            for start in range(0, slow, 100):
                batch = await asyncio.gather(*(connect(i) for i in range(start, min(slow, start + 100))))
                writers += [w for w in batch if w is not None]
            started = time.monotonic()
            body, trace_id, _ = agent_trace_body()
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
                status = await post(session, daemon.url, body)
            latency = time.monotonic() - started
            got = await until(lambda: trace_id in scored(backend), 20)
            await asyncio.sleep(max(0.0, 30 - (time.monotonic() - started)))
            grown = daemon.log.stat().st_size - size0
            return (f"conns {slow}: normal client {'HTTP ' + str(status) if status else 'failed'} in "
                    f"{latency * 1000:.0f} ms, run {'scored' if got else 'NOT scored'}; log grew {grown / 1e6:.2f} MB in 30 s")
        finally:
            for w in writers:
                w.close()


async def flood(repo: Path, tmp: Path) -> str:
    async with scoring(repo, tmp, "flood", wait=4.0) as (daemon, backend):
        expected = set()
        async with aiohttp.ClientSession() as session:
            for _ in range(20):
                body, trace_id, _ = agent_trace_body()
                await post(session, daemon.url, body)
                expected.add(trace_id)
            spans = [Span(trace_id=(i + 1).to_bytes(16, "big"), span_id=b"\x01" * 8, name="GET /")
                     for i in range(100_000)]
            flood_body = trace_service_pb2.ExportTraceServiceRequest(
                resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]).SerializeToString()
            status = await post(session, daemon.url, flood_body)
        await until(lambda: scored(backend) >= expected, 20)
        lost = len(expected - scored(backend))
        return f"flood: {len(flood_body) / 1e6:.1f} MB request of 100,000 traces (HTTP {status}): {lost} of 20 pending runs lost"


@dataclass
class Outcome:
    """A scenario's line, and its figures by name (compared across trees by ``--compare``)."""

    text: str
    figures: dict[str, float] = field(default_factory=dict)


RETRYABLE = {grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}


def retry_delay(err: grpc.aio.AioRpcError, default: float = 0.2) -> float:
    """The delay a refusal's ``google.rpc.RetryInfo`` asks for (at most 2 s), else ``default``."""
    for key, value in err.trailing_metadata() or ():
        if key == "google.rpc.retryinfo-bin" and isinstance(value, bytes):
            delay = RetryInfo.FromString(value).retry_delay
            return min(2.0, delay.seconds + delay.nanos / 1e9)
    return default


async def send_five(port: int, body: bytes, meta: tuple[tuple[str, str], ...], tally: Counter[str],
                    deadline: float) -> None:
    """One gRPC client sending ``body`` 5 times; a retryable refusal is retried after the
    delay its RetryInfo asks for, until accepted (or ``deadline``); ``tally`` counts the
    accepted bodies and the refusals by status code."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=[
            ("grpc.max_send_message_length", 64 * 2**20)]) as channel:
        call = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        for _ in range(5):
            while True:
                try:
                    await call(body, metadata=meta, timeout=60)
                    tally["accepted"] += 1
                    break
                except grpc.aio.AioRpcError as err:
                    tally[err.code().name] += 1
                    await asyncio.sleep(retry_delay(err))
                    if err.code() not in RETRYABLE or time.monotonic() > deadline:
                        break


async def memory(repo: Path, tmp: Path) -> Outcome:
    async with scoring(repo, tmp, "memory", head='auth_token = "s3cret"\n') as (daemon, _):
        await asyncio.sleep(2)
        figures = {"idle": daemon.rss_mb()}
        parts = [f"idle {figures['idle']:.0f} MB"]
        body = big_body(16 * 1024 * 1024 - 4096)
        for token in (False, True):
            for clients in (4, 8):
                meta = (("authorization", "Bearer s3cret"),) if token else ()
                tally: Counter[str] = Counter()
                deadline = time.monotonic() + 180
                task = asyncio.gather(*(send_five(daemon.grpc, body, meta, tally, deadline) for _ in range(clients)))
                peak = 0.0
                while not task.done():
                    peak = max(peak, daemon.rss_mb())
                    await asyncio.sleep(0.05)
                await task
                name = f"{clients} clients {'with' if token else 'without'} token"
                figures[f"{name}: peak"] = peak
                accepted = tally.pop("accepted", 0)
                refused = ", ".join(f"{n} {code}" for code, n in sorted(tally.items()))
                parts.append(f"{name}: peak {peak:.0f} MB, {accepted}/{5 * clients} accepted"
                             f"{f' (refused: {refused})' if refused else ''}")
        await asyncio.sleep(10)
        figures["10 s later"] = daemon.rss_mb()
        parts.append(f"10 s later: {figures['10 s later']:.0f} MB")
        return Outcome("memory: " + "; ".join(parts), figures)


async def gzip_(repo: Path, tmp: Path) -> str:
    async with scoring(repo, tmp, "gzip") as (daemon, backend):
        first, t1, _ = agent_trace_body()
        second, t2, _ = agent_trace_body()
        headers = {**PB, "Content-Encoding": "gzip"}
        async with aiohttp.ClientSession() as session:
            multi = await post(session, daemon.url, gzip.compress(first) + gzip.compress(second), headers)
            garbage = await post(session, daemon.url, gzip.compress(first) + b"trailing garbage", headers)
        await until(lambda: {t1, t2} <= scored(backend), 5)
        got = len({t1, t2} & scored(backend))
        return (f"gzip: two-member body HTTP {multi}, {got} of its 2 runs scored; "
                f"trailing garbage HTTP {garbage}")


async def maxspans(repo: Path, tmp: Path) -> str:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("agent")
    messages = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Hi"}]}])
    with tracer.start_as_current_span("invoke_agent a", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.input.messages": messages,
            "gen_ai.output.messages": messages.replace("user", "assistant")}) as run:
        for i in range(60):
            with tracer.start_as_current_span(f"db.query {i}"):
                pass
    spans = memory.get_finished_spans()
    trace_id = format(run.get_span_context().trace_id, "032x")
    async with scoring(repo, tmp, "maxspans", "max_spans_per_trace = 50\n") as (daemon, backend):
        async with aiohttp.ClientSession() as session:
            for part in (spans[:50], spans[50:60], spans[60:]):
                await post(session, daemon.url, encode_spans(part).SerializeToString())
        got = await until(lambda: trace_id in scored(backend), 10)
        return f"maxspans: a run span after its trace reached max_spans_per_trace: {'scored' if got else 'NOT scored'}"


async def json_(repo: Path, tmp: Path) -> str:
    bodies = {"nesting 700": b'{"resourceSpans":' + b"[" * 700 + b"]" * 700 + b"}",
              "lone-surrogate key": b'{"\\ud800": 1}',
              "1e999 integer": b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":1e999}]}]}]}'}
    small = b'{"\\ud800": 1, "pad": "'
    small += b"x" * (47 - len(small) - 2) + b'"}'  # a malformed 47-byte request
    async with scoring(repo, tmp, "json") as (daemon, _):
        async with aiohttp.ClientSession() as session:
            statuses = {name: await post(session, daemon.url, b, {"Content-Type": "application/json"})
                        for name, b in bodies.items()}
            size0 = daemon.log.stat().st_size
            await post(session, daemon.url, small, {"Content-Type": "application/json"})
            await asyncio.sleep(0.5)
            logged = daemon.log.stat().st_size - size0
        for _ in range(3):
            _, w = await asyncio.open_connection("127.0.0.1", daemon.http)
            w.write(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                    b"Content-Length: 100000\r\n\r\n" + b"\x0a" * 100)
            await w.drain()
            w.close()
        await asyncio.sleep(1)
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{daemon.http}/metrics") as r:
                text = await r.text()
        errors = sum(float(line.split()[-1]) for line in text.splitlines()
                     if line.startswith("tracescore_errors_total{"))
        return (f"json: statuses {statuses}; a 47-byte malformed request logged {logged} bytes; "
                f"errors_total after 3 mid-body disconnects {errors:g}")


SCENARIOS: dict[str, Callable[[Path, Path], Awaitable[str | Outcome]]] = {
    "disk": disk, "bytes": bytes_, "worker": worker, "conns": conns, "flood": flood, "memory": memory,
    "gzip": gzip_, "maxspans": maxspans, "json": json_,
}


@contextlib.contextmanager
def checkout(rev: str) -> Iterator[Path]:
    """Commit ``rev`` of this repository in a temporary ``git worktree`` (removed afterwards)."""
    holder = Path(tempfile.mkdtemp(prefix="faults-compare-"))
    tree = holder / "tree"
    subprocess.run(["git", "-C", str(HERE), "worktree", "add", "--detach", "--quiet", str(tree), rev], check=True)
    try:
        yield tree
    finally:
        subprocess.run(["git", "-C", str(HERE), "worktree", "remove", "--force", str(tree)], check=False)
        shutil.rmtree(holder, ignore_errors=True)
        subprocess.run(["git", "-C", str(HERE), "worktree", "prune"], check=False)


async def run(name: str, repo: Path) -> Outcome:
    """One scenario against the daemon of ``repo``, in its own temporary directory."""
    with tempfile.TemporaryDirectory(prefix=f"faults-{name}-") as tmp:
        (Path(tmp) / "q").mkdir(exist_ok=True) if name != "disk" else None
        result = await SCENARIOS[name](repo, Path(tmp))
        return result if isinstance(result, Outcome) else Outcome(result)


def ratios(ours: Outcome, theirs: Outcome) -> str:
    """Each figure both runs have: ours / theirs.

    Example:
        >>> ratios(Outcome("", {"peak": 150.0, "idle": 80.0}), Outcome("", {"peak": 450.0}))
        'peak 0.33'
    """
    return "; ".join(f"{key} {ours.figures[key] / value:.2f}" for key, value in theirs.figures.items()
                     if key in ours.figures and value)


async def main(args: argparse.Namespace) -> None:
    repo = args.repo.resolve()
    for name in args.scenarios:
        ours = await run(name, repo)
        if not args.compare:
            print(ours.text, flush=True)
            continue
        print(f"this tree ({repo}): {ours.text}", flush=True)
        for rev in args.compare:
            with checkout(rev) as tree:
                theirs = await run(name, tree)
            print(f"{rev}: {theirs.text}", flush=True)
            if theirs.figures:
                print(f"ratio this tree / {rev}: {ratios(ours, theirs)}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", type=Path, default=HERE, help="the tree whose daemon is measured")
    parser.add_argument("--compare", action="append", default=[], metavar="REV",
                        help="also run each scenario against commit REV (a temporary git worktree)")
    parser.add_argument("scenarios", nargs="+", choices=[*SCENARIOS, "all"])
    parsed = parser.parse_args()
    if "all" in parsed.scenarios:
        parsed.scenarios = list(SCENARIOS)
    asyncio.run(main(parsed))
