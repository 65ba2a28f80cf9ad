"""A receiver and workers on Redis started from one configuration file, as real `tracescore
serve` processes (issue 42):

* point 4: both start on one host; the worker binds only its own ``[workers] http_endpoint``
  (never the receivers' OTLP ports), its start-up line names only what it serves, and its
  health, readiness and metrics answer there while it scores what the receiver took;
* point 6: a worker killed with SIGKILL mid-run and another started in its place: ``tracescore
  status`` shows the deployment's totals from the store (the dead worker's scores included),
  equal to the runs sent, each run scored once.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from daemon_harness import (
    CaptureBackend,
    delete_redis_keys,
    emit_agent_trace,
    free_port,
    wait_until,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from serve_process import ServeProcess
from shared_redis import REDIS_URL

SCORERS = Path(__file__).parent / "scorers_for_tests.py"


class Deployment:
    """One configuration file for a receiver and its workers: free ports, a key prefix of its own."""

    def __init__(self, tmp: Path, backend: CaptureBackend, scorer: str, *, workers: str = "",
                 queue: str = "") -> None:
        self.tmp, self.prefix = tmp, f"test-roles-{uuid.uuid4().hex[:12]}:"
        self.grpc_port, self.http_port, self.worker_port = free_port(), free_port(), free_port()
        self.config = tmp / "tracescore.toml"
        self.config.write_text(
            f'[receiver]\ngrpc_endpoint = "127.0.0.1:{self.grpc_port}"\nhttp_endpoint = "127.0.0.1:{self.http_port}"\n'
            f'[workers]\nhttp_endpoint = "127.0.0.1:{self.worker_port}"\n{workers}'
            '[assembly]\ndecision_wait = 0.2\n'
            f'[queue]\nurl = "{REDIS_URL}"\nkey_prefix = "{self.prefix}"\n{queue}'
            f'[export]\nendpoint = "{backend.endpoint}"\nforward_spans = false\ntimeout_s = 2.0\nmax_backoff_s = 0.3\n'
            f'[[scorers]]\nref = "{scorer}"\n')
        self.processes: list[ServeProcess] = []

    def process(self, name: str, role: str) -> ServeProcess:
        """A `tracescore serve --role ROLE` of this configuration (probed on its role's HTTP port)."""
        port = self.worker_port if role == "worker" else self.http_port
        process = ServeProcess(self.config, self.tmp / f"{name}.log", port, flags=("-v", "--role", role))
        self.processes.append(process)
        return process


@pytest.fixture
async def backend() -> AsyncIterator[CaptureBackend]:
    capture = await CaptureBackend().start()
    yield capture
    await capture.stop()


@pytest.fixture
async def deployments(tmp_path: Path) -> AsyncIterator[list[Deployment]]:
    """The test's deployments; their processes are killed and their keys deleted afterwards."""
    made: list[Deployment] = []
    yield made
    for deployment in made:
        for process in deployment.processes:
            await process.kill()
        await delete_redis_keys(REDIS_URL, deployment.prefix)


def banner(process: ServeProcess) -> str:
    """The daemon's start-up line (`collector.service.Service.describe`)."""
    (line,) = [line for line in process.log.read_text().splitlines() if line.startswith("tracescore: ")]
    return line


async def test_a_receiver_and_a_worker_start_from_one_config_file_and_the_worker_serves_only_probes(
    tmp_path: Path, backend: CaptureBackend, deployments: list[Deployment],
) -> None:
    deployment = Deployment(tmp_path, backend, f"{SCORERS}:answer_length")
    deployments.append(deployment)
    receiver, worker = deployment.process("receiver", "receiver"), deployment.process("worker", "worker")
    await asyncio.gather(receiver.start(), worker.start())  # neither binds the other's ports

    grpc, http, own = deployment.grpc_port, deployment.http_port, deployment.worker_port
    assert f"OTLP on gRPC 127.0.0.1:{grpc} and HTTP 127.0.0.1:{http}" in banner(receiver)
    said = banner(worker)
    assert f"metrics, health and status on HTTP 127.0.0.1:{own}" in said and "no OTLP" in said, said
    assert "OTLP on" not in said and str(grpc) not in said and str(http) not in said, said

    async with aiohttp.ClientSession() as session:
        for path, expected in (("/healthz", "ok"), ("/readyz", "ready")):
            async with session.get(f"http://127.0.0.1:{own}{path}") as resp:
                assert (resp.status, (await resp.text()).strip()) == (200, expected)
        async with session.post(f"http://127.0.0.1:{own}/v1/traces", data=b"{}",
                                headers={"Content-Type": "application/json"}) as resp:
            assert resp.status == 404 and "send OTLP to a receiver" in await resp.text()

    exporter = HttpExporter(endpoint=f"http://127.0.0.1:{http}/v1/traces", timeout=30)
    trace_id, _ = await asyncio.to_thread(emit_agent_trace, exporter)
    await wait_until(lambda: [s.span.trace_id.hex() for s in backend.scores()] == [trace_id], what="the score")

    async def worker_counted() -> bool:  # the worker's own /metrics, on its own port
        return 'tracescore_score_count{scorer="answer-length"} 1.0' in await worker.metrics()

    await wait_until(worker_counted, what="the score in the worker's /metrics")
    assert "tracescore_score_count" not in await receiver.metrics()  # the receiver scores nothing
