"""Fault tests of the Redis deployment with real `tracescore serve` processes and real Redis.

* two worker processes, one killed with SIGKILL mid-load: every run scored exactly once;
* the export backend down for part of the run: every score arrives exactly once after it
  returns, and the judge (the fake OpenAI-compatible server of ``tests/support``) saw
  exactly one request per run;
* Redis itself killed and restarted mid-load (a private ``redis-server`` with
  ``appendfsync always`` on a free port): the daemon reconnects by itself, everything it
  acknowledged is scored, exactly once;
* 10x overload: retryable refusals with Retry-After, bounded RSS, no crash.

The shared Redis (``TRACESCORE_TEST_REDIS_URL``, default 127.0.0.1:6379) must be up: these
tests fail, never skip, without it. Each test uses its own key prefix and deletes its keys.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import llm_server  # tests/support (pytest pythonpath): the fake OpenAI-compatible server
import pytest
import redis.asyncio as aioredis
from daemon_harness import INPUT, OUTPUT, CaptureBackend, free_port, wait_until
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from serve_process import PROBE, START_S, STOP_S
from shared_redis import REDIS_URL

from collector.store.redis.keys import RedisKeys
from collector.store.redis.store import RedisStore

ROOT = Path(__file__).parents[2]
PROTOBUF = {"Content-Type": "application/x-protobuf"}

SLOW_SCORER = '''
import asyncio
from scorers import create_scorer


async def _score(run):
    await asyncio.sleep(0.04)
    return 1.0


slow = create_scorer(id="slow", description="40 ms per run", type="agent", version="1").generate_score(_score)
'''

JUDGE_SCORER = '''
import os
from scorers import Judge, create_scorer

judge = Judge(model="openai/gpt-4o-mini", instructions="Grade.",
              model_settings={"api_base": os.environ["TS_TEST_JUDGE_URL"], "api_key": "k"})
judged = create_scorer(id="judged", description="judge", type="agent", judge=judge, version="1").generate_score(
    description="score", create_prompt=lambda run: f"score the run of trace {run.trace_id}")
'''


def agent_bodies(runs: int, per_request: int) -> list[tuple[bytes, list[str]]]:
    """``runs`` agent traces (invoke_agent -> chat) as OTLP/HTTP bodies, with their trace ids."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "support-bot"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("load")
    import json

    attrs = {"gen_ai.input.messages": json.dumps(INPUT), "gen_ai.output.messages": json.dumps(OUTPUT)}
    bodies: list[tuple[bytes, list[str]]] = []
    for start in range(0, runs, per_request):
        ids = []
        for _ in range(min(per_request, runs - start)):
            with tracer.start_as_current_span("invoke_agent support", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support", **attrs,
            }) as root:
                with tracer.start_as_current_span("chat gpt-4o-mini", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", **attrs,
                }):
                    pass
                ids.append(format(root.get_span_context().trace_id, "032x"))
        bodies.append((encode_spans(memory.get_finished_spans()).SerializeToString(), ids))
        memory.clear()
    provider.shutdown()
    return bodies


class Proc:
    """One `tracescore serve --role ROLE` child process with its own config and log."""

    def __init__(self, tmp: Path, name: str, role: str, queue: dict[str, Any], export: str, scorer: str,
                 concurrency: int = 8, env: dict[str, str] | None = None, receiver: dict[str, Any] | None = None,
                 export_timeout_s: float = 1.0, extra: str = "") -> None:
        self.http_port, self.grpc_port = free_port(), free_port()
        self.role, self.log = role, tmp / f"{name}.log"
        self.env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})}
        rec = {"grpc_endpoint": f"127.0.0.1:{self.grpc_port}", "http_endpoint": f"127.0.0.1:{self.http_port}",
               "retry_after_s": 1.0, **(receiver or {})}
        self.config = tmp / f"{name}.toml"
        self.config.write_text(
            "[receiver]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in rec.items())
            + "[assembly]\ndecision_wait = 0.2\n"
            + "[queue]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in queue.items())
            + f"[workers]\nconcurrency = {concurrency}\nhttp_endpoint = \"127.0.0.1:{self.http_port}\"\n"
            + (f"job_timeout_s = {queue['visibility_timeout_s'] / 2}\n" if "visibility_timeout_s" in queue else "")
            + f'[export]\nendpoint = "{export}"\ntimeout_s = {export_timeout_s}\nmax_backoff_s = 0.3\nforward_spans = false\n'
            + f'[[scorers]]\nref = "{scorer}"\n' + extra
        )
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}/v1/traces"

    async def start(self) -> Proc:
        with self.log.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "collector.cli", "-v", "serve", "--config", str(self.config),
                "--role", self.role, stdout=log, stderr=log, env=self.env, cwd=ROOT,
            )
        await wait_until(self.ready, timeout=START_S, what=f"{self.role} ready (log: {self.log})")
        return self

    async def ready(self) -> bool:
        self.assert_alive()
        try:
            async with aiohttp.ClientSession(timeout=PROBE) as session:
                async with session.get(f"http://127.0.0.1:{self.http_port}/readyz") as resp:
                    return resp.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    def assert_alive(self) -> None:
        assert self.proc is not None
        if self.proc.returncode is not None:
            raise AssertionError(f"{self.role} exited {self.proc.returncode}: {self.log.read_text()[-3000:]}")

    def rss_kb(self) -> int:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    async def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(sig)
            await asyncio.wait_for(self.proc.wait(), STOP_S)


def _toml(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    return str(value).lower() if isinstance(value, bool) else str(value)


async def post_until_accepted(session: aiohttp.ClientSession, url: str, body: bytes,
                              timeout: float = 60.0) -> list[tuple[int, str | None]]:  # noqa: ASYNC109
    """POST until 200 (retrying refusals and connection errors, as an OTLP exporter would)."""
    refusals: list[tuple[int, str | None]] = []
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            async with session.post(url, data=body, headers=PROTOBUF) as resp:
                if resp.status == 200:
                    return refusals
                assert resp.status in (429, 503), f"non-retryable answer {resp.status}: {await resp.text()}"
                refusals.append((resp.status, resp.headers.get("Retry-After")))
        except aiohttp.ClientError:
            refusals.append((0, None))
        assert asyncio.get_running_loop().time() < deadline, "the daemon never accepted the request"
        await asyncio.sleep(0.05)  # client backoff


def unique_scores(backend: CaptureBackend) -> tuple[int, set[str]]:
    """Distinct scores (score span ids) received, and the traces they score.

    A score's span id is fixed when it is produced: a worker killed between the backend's
    success answer and the outbox release makes another replica send that same span again
    (at-least-once delivery of one score, which backends merge), never a second score.
    """
    scores = backend.scores()
    return len({s.span.span_id for s in scores}), {s.span.trace_id.hex() for s in scores}


@pytest.fixture
async def deployment(tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    """A key prefix on the shared Redis, a capture backend, and cleanup of processes and keys."""
    prefix = f"test-{uuid.uuid4().hex[:12]}:"
    client = aioredis.Redis.from_url(REDIS_URL)
    await client.ping()  # fail loudly when Redis is missing
    state: dict[str, Any] = {"prefix": prefix, "procs": [], "tmp": tmp_path, "redis": client,
                             "queue": {"url": REDIS_URL, "key_prefix": prefix}}
    yield state
    for proc in state["procs"]:
        if proc.proc is not None and proc.proc.returncode is None:
            proc.proc.kill()
            await proc.proc.wait()
    for backend in state.get("backends", []):
        await backend.stop()
    cleaner = RedisStore(REDIS_URL, key_prefix=prefix)
    await cleaner.delete_all()
    await cleaner.shutdown()
    await client.aclose()


async def _drained(client: aioredis.Redis, prefix: str) -> bool:
    keys = RedisKeys(prefix)
    return await client.xlen(keys.jobs) == 0 and await client.zcard(keys.outbox) == 0


@pytest.mark.long
async def test_sigkill_of_one_of_two_workers_scores_every_run_exactly_once(deployment: dict[str, Any]) -> None:
    tmp, queue = deployment["tmp"], {**deployment["queue"], "visibility_timeout_s": 2.0}
    backend = await CaptureBackend().start()
    deployment["backends"] = [backend]
    scorer = tmp / "slow_scorer.py"
    scorer.write_text(SLOW_SCORER)
    ref = f"{scorer}:slow"
    receiver = Proc(tmp, "receiver", "receiver", queue, backend.endpoint, ref)
    workers = [Proc(tmp, f"worker{i}", "worker", queue, backend.endpoint, ref, concurrency=6) for i in (1, 2)]
    deployment["procs"] += [receiver, *workers]
    await asyncio.gather(receiver.start(), *(w.start() for w in workers))

    bodies = agent_bodies(1000, 50)
    expected = {t for _, ids in bodies for t in ids}
    async with aiohttp.ClientSession() as session:
        for body, _ in bodies:
            await post_until_accepted(session, receiver.url, body)
    await wait_until(lambda: unique_scores(backend)[0] >= 200, timeout=60, what="200 scores")
    await workers[0].stop(signal.SIGKILL)  # mid-load: it holds leased jobs and maybe outbox claims

    await wait_until(lambda: unique_scores(backend)[1] == expected, timeout=90, what="every run scored")
    await wait_until(lambda: _drained(deployment["redis"], deployment["prefix"]), timeout=30, what="drained")
    total, scored = unique_scores(backend)
    assert total == len(expected) == 1000, f"{total - len(scored)} second scores"
    resent = len(backend.scores()) - total
    assert resent <= 256, f"{resent} spans re-sent: more than the one export batch a SIGKILL can interrupt"
    assert await deployment["redis"].xlen(RedisKeys(deployment["prefix"]).dead) == 0
    workers[1].assert_alive()
    receiver.assert_alive()



@pytest.mark.long
async def test_export_outage_delays_scores_never_duplicates_them_nor_the_judge_calls(
    deployment: dict[str, Any],
) -> None:
    tmp, queue, client, prefix = deployment["tmp"], deployment["queue"], deployment["redis"], deployment["prefix"]
    llm = await llm_server.LLMTestServer().start()
    try:
        # Held (bound, not listening: connections are refused) until the backend binds it: a
        # port only found free could be another test's by then, the outage lasting seconds.
        backend_port = free_port()
        endpoint = f"http://127.0.0.1:{backend_port}"
        scorer = tmp / "judge_scorer.py"
        scorer.write_text(JUDGE_SCORER)
        env = {"TS_TEST_JUDGE_URL": llm.url + "/v1"}
        # An export that outlives its timeout is ambiguous (the backend may have the spans) and
        # is sent again, by design (at least once): with 1 s, a busy machine could cause such a
        # re-send, which this test counts as a duplicate. 10 s leaves only a real fault to do it.
        both = Proc(tmp, "all", "all", queue, endpoint, f"{scorer}:judged", env=env, export_timeout_s=10.0)
        worker = Proc(tmp, "worker", "worker", queue, endpoint, f"{scorer}:judged", env=env, export_timeout_s=10.0)
        deployment["procs"] += [both, worker]
        await asyncio.gather(both.start(), worker.start())

        bodies = agent_bodies(200, 20)
        expected = {t for _, ids in bodies for t in ids}
        async with aiohttp.ClientSession() as session:
            for body, _ in bodies:
                await post_until_accepted(session, both.url, body)
        # Every run is judged and its score waits in the outbox while the backend is down.
        await wait_until(lambda: len(llm.requests) >= 200, timeout=90, what="200 judge calls")

        async def all_in_outbox() -> bool:
            return await client.zcard(RedisKeys(prefix).outbox) == 200

        await wait_until(all_in_outbox, timeout=30, what="200 scores in the outbox")
        backend = await CaptureBackend(backend_port).start()
        deployment["backends"] = [backend]
        await wait_until(lambda: unique_scores(backend)[1] == expected, timeout=60, what="every score exported")
        await wait_until(lambda: _drained(client, prefix), timeout=30, what="outbox drained")
        total, _ = unique_scores(backend)
        assert total == len(backend.scores()) == 200, "a score was exported twice"
        prompts = [r.message_text("user") for r in llm.requests]
        per_trace = {t: sum(t in p for p in prompts) for t in expected}
        assert len(prompts) == 200 and set(per_trace.values()) == {1}
    finally:
        from scorers._judge_transport import aclose_judge_clients

        await aclose_judge_clients()
        await llm.stop()


class PrivateRedis:
    """A redis-server of this test alone: AOF with fsync on every write, on a free port."""

    def __init__(self, tmp: Path) -> None:
        self.port, self.dir = free_port(), tmp / "redis-data"
        self.dir.mkdir()
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        server = shutil.which("redis-server")
        assert server, "redis-server is not installed"
        self.proc = await asyncio.create_subprocess_exec(
            server, "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self.dir),
            "--appendonly", "yes", "--appendfsync", "always", "--save", "",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )

        async def pong() -> bool:
            client = aioredis.Redis.from_url(self.url)
            try:
                return bool(await client.ping())
            except Exception:
                return False
            finally:
                await client.aclose()

        await wait_until(pong, timeout=20, what="private redis up")

    async def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        await self.proc.wait()


async def test_redis_restart_mid_load_loses_nothing_acknowledged(deployment: dict[str, Any]) -> None:
    tmp = deployment["tmp"]
    redis_server = PrivateRedis(tmp)
    await redis_server.start()
    try:
        backend = await CaptureBackend().start()
        deployment["backends"] = [backend]
        queue = {"url": redis_server.url, "key_prefix": deployment["prefix"], "visibility_timeout_s": 3.0}
        scorer = ROOT / "tests" / "integration" / "scorers_for_tests.py"
        daemon = Proc(tmp, "daemon", "all", queue, backend.endpoint, f"{scorer}:answer_length")
        deployment["procs"].append(daemon)
        await daemon.start()

        bodies = agent_bodies(300, 10)
        acknowledged: set[str] = set()
        async with aiohttp.ClientSession() as session:
            for i, (body, ids) in enumerate(bodies):
                if i == 10:
                    await redis_server.kill()  # mid-load, with scores and jobs in flight
                    # While Redis is down: retryable refusals (503 + Retry-After), never success.
                    for _ in range(3):
                        async with session.post(daemon.url, data=body, headers=PROTOBUF) as resp:
                            assert resp.status == 503 and resp.headers.get("Retry-After"), resp.status
                    daemon.assert_alive()
                    await redis_server.start()  # same port, same data directory; no daemon restart
                await post_until_accepted(session, daemon.url, body)
                acknowledged.update(ids)
        await wait_until(lambda: unique_scores(backend)[1] >= acknowledged, timeout=60,
                         what="every acknowledged run scored")
        restarted = aioredis.Redis.from_url(redis_server.url)
        try:
            await wait_until(lambda: _drained(restarted, deployment["prefix"]), timeout=30, what="drained")
        finally:
            await restarted.aclose()
        total, scored = unique_scores(backend)
        assert scored == acknowledged and total == len(backend.scores()) == len(acknowledged) == 300
        daemon.assert_alive()
    finally:
        if redis_server.proc is not None and redis_server.proc.returncode is None:
            await redis_server.kill()


@pytest.mark.long
async def test_tenfold_overload_is_refused_retryably_with_bounded_memory(deployment: dict[str, Any]) -> None:
    tmp, client, prefix = deployment["tmp"], deployment["redis"], deployment["prefix"]
    queue = {**deployment["queue"], "max_pending_jobs": 100}  # the stream's high-water mark
    backend = await CaptureBackend().start()
    deployment["backends"] = [backend]
    scorer = tmp / "slow_scorer.py"
    scorer.write_text(SLOW_SCORER)
    receiver = Proc(tmp, "receiver", "receiver", queue, backend.endpoint, f"{scorer}:slow")
    worker = Proc(tmp, "worker", "worker", queue, backend.endpoint, f"{scorer}:slow", concurrency=2)
    deployment["procs"] += [receiver, worker]
    await asyncio.gather(receiver.start(), worker.start())
    baseline_kb = receiver.rss_kb()

    # The worker scores ~50 runs/s (2 at a time, 40 ms each); 8 senders offer 500 runs/s for 8 s.
    bodies = agent_bodies(4000, 20)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    statuses: list[int] = []
    retry_after: list[str | None] = []
    peak_kb, peak_stream = baseline_kb, 0

    grpc_codes: list[grpc.StatusCode] = []
    grpc_retry_info: list[bool] = []

    async def sender(first: int) -> None:
        async with aiohttp.ClientSession() as session, \
                grpc.aio.insecure_channel(f"127.0.0.1:{receiver.grpc_port}") as channel:
            export = channel.unary_unary(
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                request_serializer=lambda body: body,
                response_deserializer=trace_service_pb2.ExportTraceServiceResponse.FromString,
            )
            for k in range(first, len(bodies), 8):
                await asyncio.sleep(max(0.0, t0 + k * 0.04 - loop.time()))  # pacing: 25 requests/s
                if k % 5 == 4:  # every fifth request over OTLP/gRPC
                    call = export(bodies[k][0])
                    try:
                        await call
                        grpc_codes.append(grpc.StatusCode.OK)
                    except grpc.aio.AioRpcError as err:
                        grpc_codes.append(err.code())
                        trailers = err.trailing_metadata() or ()
                        grpc_retry_info.append(any(key == "google.rpc.retryinfo-bin" for key, _ in trailers))
                    continue
                async with session.post(receiver.url, data=bodies[k][0], headers=PROTOBUF) as resp:
                    statuses.append(resp.status)
                    if resp.status != 200:
                        retry_after.append(resp.headers.get("Retry-After"))

    async def sampler() -> None:
        nonlocal peak_kb, peak_stream
        while True:
            peak_kb = max(peak_kb, receiver.rss_kb())
            peak_stream = max(peak_stream, await client.xlen(RedisKeys(prefix).jobs))
            await asyncio.sleep(0.05)

    sampling = asyncio.create_task(sampler())
    try:
        await asyncio.gather(*(sender(i) for i in range(8)))
    finally:
        sampling.cancel()
    receiver.assert_alive()
    worker.assert_alive()
    assert set(statuses) <= {200, 429}, sorted(set(statuses))
    assert statuses.count(429) > len(statuses) / 2, "a 10x overload was mostly accepted"
    assert all(value is not None and int(value) >= 1 for value in retry_after)
    assert set(grpc_codes) <= {grpc.StatusCode.OK, grpc.StatusCode.RESOURCE_EXHAUSTED}, set(grpc_codes)
    assert grpc_codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED) > len(grpc_codes) / 2
    assert grpc_retry_info and all(grpc_retry_info), "RESOURCE_EXHAUSTED without RetryInfo"
    assert peak_stream < 100 + 1000, f"the stream grew to {peak_stream} past a high-water mark of 100"
    assert peak_kb - baseline_kb < 150 * 1024, f"receiver RSS grew {(peak_kb - baseline_kb) // 1024} MB"
    assert await receiver.ready()
    print(f"overload: {statuses.count(200)} accepted, {statuses.count(429)} refused (429), gRPC "
          f"{grpc_codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED)}/{len(grpc_codes)} RESOURCE_EXHAUSTED, "
          f"peak stream {peak_stream}, receiver RSS {baseline_kb // 1024} -> {peak_kb // 1024} MB")
