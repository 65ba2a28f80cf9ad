"""End to end on the Redis queue: receiver and worker roles wired by `Service`, one process;
with the deployment's keys in one partition and in three (`queue.partitions`)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from daemon_harness import CaptureBackend, emit_agent_trace, wait_until
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from shared_redis import REDIS_URL

from collector.common.errors import ConfigError
from collector.config import config_from_dict
from collector.service import Service
from collector.store.redis.partitioned import open_redis_store
from collector.work.registry import ScorerRegistry

PROTOBUF = {"Content-Type": "application/x-protobuf"}


async def _services(config_data: dict, *roles: str) -> list[Service]:
    config = config_from_dict(config_data, env={})
    registry = await asyncio.to_thread(ScorerRegistry.load, config.scorers)  # imports scorer files
    # Building a Service imports exporter modules (blocking): done off the loop.
    services = [await asyncio.to_thread(Service, config, registry, role=role) for role in roles]
    for service in services:
        await service.start()
    return services


async def _shutdown(*services: Service) -> None:
    """Shut every service down, each within 30 s, even when an earlier one failed or hung.

    A hang fails here, with the stack of the stuck await. A service left running would leave
    its gRPC server to the garbage collector, and grpc's finaliser then hangs the process.
    """
    errors: list[BaseException] = []
    for service in services:
        try:
            async with asyncio.timeout(30):
                await service.shutdown()
        except Exception as err:
            errors.append(err)
    if errors:
        raise errors[0]


def _decisions(service: Service, reason: str) -> float:
    value = service.metrics.registry.get_sample_value(
        "tracescore_decisions_total", {"scorer": "answer-length", "reason": reason})
    return value or 0.0


async def _post(service: Service, body: bytes) -> None:
    assert service.http is not None
    async with aiohttp.ClientSession() as session:
        async with session.post(f"http://127.0.0.1:{service.http.port}/v1/traces", data=body,
                                headers=PROTOBUF) as resp:
            assert resp.status == 200, await resp.text()

SCORERS = Path(__file__).parent / "scorers_for_tests.py"


def _config(deployment: tuple[str, CaptureBackend, int], url: str = REDIS_URL, decision_wait: float = 0.2) -> dict:
    prefix, backend, partitions = deployment
    return {
        "receiver": {"grpc_endpoint": "127.0.0.1:0", "http_endpoint": "127.0.0.1:0"},
        "workers": {"http_endpoint": "127.0.0.1:0"},  # a worker's own listener (metrics, health, status)
        "assembly": {"decision_wait": decision_wait},
        "queue": {"url": url, "key_prefix": prefix, "partitions": partitions},
        "export": {"endpoint": backend.endpoint, "timeout_s": 2.0, "max_backoff_s": 0.5},
        "scorers": [{"ref": f"{SCORERS}:answer_length"}],
    }


Deployment = tuple[str, CaptureBackend, int]


@pytest.fixture(params=[1, 3], ids=["one-partition", "3-partitions"])
async def setup(request: pytest.FixtureRequest) -> AsyncIterator[Deployment]:
    """(key prefix, score backend, partitions) of a test's deployment."""
    prefix = f"test-{uuid.uuid4().hex[:12]}:"
    backend = await CaptureBackend().start()
    yield prefix, backend, request.param
    await backend.stop()
    cleaner = open_redis_store(REDIS_URL, key_prefix=prefix, partitions=request.param)
    await cleaner.delete_all()
    await cleaner.shutdown()


async def test_receiver_and_worker_roles_score_through_redis(setup: Deployment) -> None:
    backend = setup[1]
    receiver, worker = await _services(_config(setup), "receiver", "worker")
    try:
        assert receiver.http is not None and worker.http is not None
        assert worker.grpc is None and receiver.worker._task is None  # roles start only their parts
        url = f"http://127.0.0.1:{receiver.http.port}/v1/traces"
        trace_id, span_id = await asyncio.to_thread(emit_agent_trace, HttpExporter(endpoint=url, timeout=30))
        await wait_until(lambda: len(backend.scores()) == 1, what="the score")
        (score,) = backend.scores()
        assert (score.span.trace_id.hex(), score.span.parent_span_id.hex()) == (trace_id, span_id)
        # A worker replica takes no OTLP data: its own listener serves probes, metrics and status.
        assert worker.http.port != receiver.http.port
        worker_url = f"http://127.0.0.1:{worker.http.port}/v1/traces"
        async with aiohttp.ClientSession() as session:
            async with session.post(worker_url, data=b"{}", headers={"Content-Type": "application/json"}) as resp:
                assert resp.status == 404 and "send OTLP to a receiver" in await resp.text()
            async with session.get(f"http://127.0.0.1:{worker.http.port}/readyz") as resp:
                assert resp.status == 200
    finally:
        await _shutdown(receiver, worker)


def test_split_roles_need_a_shared_queue(tmp_path: Path) -> None:
    config = config_from_dict({"queue": {"url": f"sqlite:///{tmp_path / 'q.db'}"}}, env={})
    with pytest.raises(ConfigError, match="redis"):
        Service(config, ScorerRegistry([]), role="worker")
    with pytest.raises(ConfigError, match="role"):
        Service(config, ScorerRegistry([]), role="bogus")


async def test_spans_of_one_trace_at_two_receivers_are_scored_as_one_run(
    setup: Deployment,
) -> None:
    backend = setup[1]
    memory = InMemorySpanExporter()
    trace_id, agent_span = await asyncio.to_thread(emit_agent_trace, memory)
    chat, root = memory.get_finished_spans()  # the child ends (and is exported) first
    a, b, worker = await _services(_config(setup), "receiver", "receiver", "worker")
    try:
        await _post(a, encode_spans([chat]).SerializeToString())  # behind a load balancer:
        await _post(b, encode_spans([root]).SerializeToString())  # the root reaches another replica
        await wait_until(lambda: len(backend.scores()) == 1, what="the score")
        (score,) = backend.scores()
        assert (score.span.trace_id.hex(), score.span.parent_span_id.hex()) == (trace_id, agent_span)
        assert _decisions(a, "queued") + _decisions(b, "queued") == 1  # decided once, by one of them
        assert _decisions(a, "duplicate") + _decisions(b, "duplicate") == 0
    finally:
        await _shutdown(a, b, worker)


async def test_a_pending_decision_survives_its_receiver(setup: Deployment) -> None:
    backend = setup[1]
    memory = InMemorySpanExporter()
    trace_id, _ = await asyncio.to_thread(emit_agent_trace, memory)
    # The decision is due 5 s after the spans came: the first receiver is gone well before,
    # however slowly a busy machine shuts it down (with 1 s, a slow shutdown could decide it).
    data = _config(setup, decision_wait=5.0)
    (first,) = await _services(data, "receiver")
    await _post(first, encode_spans(memory.get_finished_spans()).SerializeToString())
    await first.shutdown()  # gone before the decision was due
    assert _decisions(first, "queued") == 0
    second, worker = await _services(data, "receiver", "worker")
    try:
        await wait_until(lambda: len(backend.scores()) == 1, what="the score of the pending trace")
        assert backend.scores()[0].span.trace_id.hex() == trace_id
        assert _decisions(second, "queued") == 1
    finally:
        await _shutdown(second, worker)


async def test_readyz_says_not_ready_while_redis_cannot_be_reached(setup: Deployment) -> None:
    """SPEC: /readyz is 200 once receivers, queue and exporter are up. A receiver whose Redis is
    away refuses every request, so it must not take traffic from a load balancer meanwhile."""
    (away,) = await _services(_config(setup, url="redis://127.0.0.1:1/0"), "receiver")
    (up,) = await _services(_config(setup), "receiver")
    try:
        async with aiohttp.ClientSession() as session:
            for service, status in ((away, 503), (up, 200)):
                assert service.http is not None
                async with session.get(f"http://127.0.0.1:{service.http.port}/readyz") as resp:
                    assert resp.status == status
    finally:
        await _shutdown(away, up)
