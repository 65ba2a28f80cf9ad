"""A receiver and workers on Redis started from one configuration file, as real `tracescore
serve` processes (issue 42):

* point 4: both start on one host; the worker binds only its own ``[workers] http_endpoint``
  (never the receivers' OTLP ports), its start-up line names only what it serves, and its
  health, readiness and metrics answer there while it scores what the receiver took;
* point 6: a worker killed with SIGKILL mid-run and another started in its place: ``tracescore
  status`` shows the deployment's totals from the store (the dead worker's scores included),
  equal to the runs sent, each run scored once;
* point 12, what the README promises of judge calls across a kill: a call the dead worker had
  been answered is not sent again, a call in flight when it died is (paid twice), and status
  counts each call answered to a worker once.
"""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import llm_server  # tests/support (pytest pythonpath): the fake OpenAI-compatible server
import pytest
from daemon_harness import (
    CaptureBackend,
    delete_redis_keys,
    emit_agent_trace,
    free_port,
    wait_until,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from serve_process import ServeProcess, cli
from shared_redis import REDIS_URL
from test_redis_faults import (
    JUDGE_SCORER,
    SLOW_SCORER,
    agent_bodies,
    post_until_accepted,
    unique_scores,
)

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

    def process(self, name: str, role: str, env: dict[str, str] | None = None) -> ServeProcess:
        """A `tracescore serve --role ROLE` of this configuration (probed on its role's HTTP port)."""
        port = self.worker_port if role == "worker" else self.http_port
        process = ServeProcess(self.config, self.tmp / f"{name}.log", port, flags=("-v", "--role", role), env=env)
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


RUNS = 48
SLOW = SLOW_SCORER.replace("asyncio.sleep(0.04)", "asyncio.sleep(0.2)").replace("40 ms", "200 ms")


async def test_status_after_a_worker_is_killed_counts_every_workers_scores_each_run_once(
    tmp_path: Path, backend: CaptureBackend, deployments: list[Deployment],
) -> None:
    scorer = tmp_path / "slow_scorer.py"
    scorer.write_text(SLOW)  # 200 ms a run, 4 at a time: the 48 runs take one worker about 2.4 s
    deployment = Deployment(tmp_path, backend, f"{scorer}:slow", workers="concurrency = 4\n",
                            queue="visibility_timeout_s = 1.0\n")  # a dead worker's jobs are taken over after 1 s
    deployments.append(deployment)
    receiver, doomed = deployment.process("receiver", "receiver"), deployment.process("doomed", "worker")
    await asyncio.gather(receiver.start(), doomed.start())

    bodies = agent_bodies(RUNS, 8)
    expected = {t for _, ids in bodies for t in ids}
    async with aiohttp.ClientSession() as session:
        for body, _ in bodies:
            await post_until_accepted(session, f"http://127.0.0.1:{deployment.http_port}/v1/traces", body)
    await wait_until(lambda: unique_scores(backend)[0] >= 12, timeout=60, what="the first worker's first scores")
    await doomed.stop(signal.SIGKILL)  # mid-run: it holds leased jobs
    scored_before = unique_scores(backend)[0]
    assert scored_before < RUNS, "the worker finished every run before it was killed: no mid-run kill"

    standby = deployment.process("standby", "worker")  # the same config file, the same port: the old one is dead
    await standby.start()
    await wait_until(lambda: unique_scores(backend)[1] == expected, timeout=60, what="every run scored")
    await wait_until(receiver.idle, timeout=30, what="nothing left in the store")

    code, out, err = await cli("status", "--config", str(deployment.config), "--once", "--format", "json")
    assert code == 0, err
    view = json.loads(out)
    totals = view["totals"]["scorers"]["slow"]
    assert (totals["scored"], totals["failed"], totals["not_scorable"]) == (RUNS, 0, 0), totals
    assert view["decisions"]["slow"]["scored"] == view["scores"]["slow"]["count"] == RUNS
    assert view["scores"]["slow"]["buckets"]["1.0"] == RUNS  # every score 1.0, the dead worker's included
    standby_scored = metric_value(await standby.metrics(), 'tracescore_score_count{scorer="slow"}')
    assert standby_scored < RUNS  # the living worker's own counter misses the dead one's scores
    distinct, traces = unique_scores(backend)
    assert distinct == RUNS and traces == expected, f"{distinct} scores for {RUNS} runs"  # each run scored once
    print(f"{scored_before} of {RUNS} runs scored before the SIGKILL; the standby's own counter says "
          f"{standby_scored:.0f}; status totals say {totals['scored']:.0f}")


def metric_value(text: str, sample: str) -> float:
    """The value of one sample line (``name{labels}``) of a Prometheus text page, 0 if absent."""
    return next((float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(sample + " ")), 0.0)


async def test_after_a_kill_only_the_judge_calls_in_flight_are_sent_again(
    tmp_path: Path, backend: CaptureBackend, deployments: list[Deployment],
) -> None:
    llm = await llm_server.LLMTestServer().start()
    gate = asyncio.Event()  # the calls from the fifth on are held (in flight) until it is set
    llm.responder = lambda body: (llm_server.Reply.json({"score": 0.5}) if len(llm.requests) <= 4 or gate.is_set()
                                  else llm_server.Reply.json({"score": 0.5}).held(gate))
    try:
        scorer = tmp_path / "judge_scorer.py"
        scorer.write_text("import litellm  # noqa: F401  as the worker starts\n" + JUDGE_SCORER)
        deployment = Deployment(tmp_path, backend, f"{scorer}:judged", workers="concurrency = 4\n",
                                queue="visibility_timeout_s = 1.0\n")
        deployments.append(deployment)
        env = {"TS_TEST_JUDGE_URL": llm.url + "/v1"}
        receiver, doomed = deployment.process("receiver", "receiver", env), deployment.process("doomed", "worker", env)
        await asyncio.gather(receiver.start(), doomed.start())
        bodies = agent_bodies(8, 8)
        expected = {t for _, ids in bodies for t in ids}
        async with aiohttp.ClientSession() as session:
            await post_until_accepted(session, f"http://127.0.0.1:{deployment.http_port}/v1/traces", bodies[0][0])
        await wait_until(lambda: len(llm.requests) == 8 and len(backend.scores()) == 4, timeout=60,
                         what="four runs judged and scored, four judge calls in flight")
        await doomed.stop(signal.SIGKILL)  # four calls in flight: sent, never answered to the worker
        gate.set()
        standby = deployment.process("standby", "worker", env)
        await standby.start()
        await wait_until(lambda: unique_scores(backend)[1] == expected, timeout=60, what="every run scored")
        await wait_until(receiver.idle, timeout=30, what="nothing left in the store")

        prompts = [r.message_text("user") for r in llm.requests]
        asked = sorted(sum(t in p for p in prompts) for t in expected)
        assert asked == [1, 1, 1, 1, 2, 2, 2, 2], asked  # answered calls never again; the four in flight twice
        code, out, err = await cli("status", "--config", str(deployment.config), "--once", "--format", "json")
        assert code == 0, err
        view = json.loads(out)
        assert view["judge"]["openai/gpt-4o-mini"]["calls"] == 8  # the calls answered to a worker, once each
        assert view["totals"]["scorers"]["judged"]["scored"] == 8 and unique_scores(backend)[0] == 8
        print(f"judge calls: {len(prompts)} sent for 8 runs across the SIGKILL (4 in flight then); "
              f"status counts {view['judge']['openai/gpt-4o-mini']['calls']:.0f}")
    finally:
        gate.set()
        from scorers._judge_transport import aclose_judge_clients

        await aclose_judge_clients()
        await llm.stop()
