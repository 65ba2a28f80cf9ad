"""`/status` and `tracescore status` against real daemons under a bounded load, on both
stores: the bearer token is required, the view has what the daemon measured, and a Redis
group (receiver and worker replicas) is seen whole from one URL, and once from two."""

from __future__ import annotations

import asyncio
import json
import os
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from daemon_harness import CaptureBackend, agent_trace_body, delete_redis_keys, wait_until
from serve_process import cli

from collector.config import config_from_dict
from collector.service import Service
from collector.work.registry import ScorerRegistry

SCORERS = Path(__file__).parent / "scorers_for_tests.py"
REDIS_URL = os.environ.get("TRACESCORE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
TOKEN = "s3cret-status"
RUNS = 24  # the bounded load: agent traces of two spans each, posted 8 at a time
PROTOBUF = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {TOKEN}"}


async def services(url: str, prefix: str, backend: str, *roles: str) -> list[Service]:
    config = config_from_dict({
        "receiver": {"grpc_endpoint": "", "http_endpoint": "127.0.0.1:0", "auth_token": TOKEN},
        "assembly": {"decision_wait": 0.2}, "queue": {"url": url, "key_prefix": prefix},
        "export": {"endpoint": backend, "forward_spans": False, "timeout_s": 2.0},
        "scorers": [{"ref": f"{SCORERS}:answer_length"}, {"ref": f"{SCORERS}:always_fails"}],
    }, env={})
    registry = await asyncio.to_thread(ScorerRegistry.load, config.scorers)
    started = [await asyncio.to_thread(Service, config, registry, role=role) for role in roles]
    for service in started:
        await service.start()
    return started


@pytest.fixture(params=["sqlite", "redis"])
async def group(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[list[Service]]:
    backend = await CaptureBackend().start()
    prefix = f"test-{uuid.uuid4().hex[:12]}:"
    if request.param == "sqlite":
        running = await services(f"sqlite:///{tmp_path / 'q.db'}", prefix, backend.endpoint, "all")
    else:
        running = await services(REDIS_URL, prefix, backend.endpoint, "receiver", "worker")
    yield running
    for service in running:
        async with asyncio.timeout(30):
            await service.shutdown()
    await backend.stop()
    if request.param == "redis":
        await delete_redis_keys(REDIS_URL, prefix)


def url_of(service: Service) -> str:
    assert service.http is not None
    return f"http://127.0.0.1:{service.http.port}"


async def load(service: Service) -> list[str]:
    bodies = [await asyncio.to_thread(agent_trace_body) for _ in range(RUNS)]
    semaphore = asyncio.Semaphore(8)
    async with aiohttp.ClientSession() as session:
        async def post(body: bytes) -> None:
            async with semaphore, session.post(url_of(service) + "/v1/traces", data=body, headers=PROTOBUF) as resp:
                assert resp.status == 200
        await asyncio.gather(*(post(body) for body, _, _ in bodies))
    return [trace_id for _, trace_id, _ in bodies]


async def status_json(*urls: str, token: str | None = TOKEN) -> dict[str, Any]:
    args = ["status", *urls, "--once", "--format", "json"] + (["--token", token] if token else [])
    code, out, err = await cli(*args)
    assert code == 0, err
    return dict(json.loads(out))


async def test_status_shows_what_the_daemon_measured(group: list[Service]) -> None:
    front = group[0]
    await load(front)

    async def all_decided() -> bool:
        view = await status_json(url_of(front))
        decided = view["decisions"].get("answer-length", {}).get("scored", 0)
        failed = view["decisions"].get("always-fails", {}).get("failed", 0)
        # The dead letters too: a replica's snapshot reads the store's counts a moment before
        # its counters, so the counters may show every failure before the counts do.
        return (decided == RUNS and failed == RUNS and view["received"].get("spans_per_min", 0) > 0
                and (view.get("queue") or {}).get("dead") == RUNS)

    await wait_until(all_decided, timeout=60, what="every run decided, as /status tells")
    view = await status_json(url_of(front))
    assert view["replicas"] == sorted(s.status.replica for s in group)
    assert sorted(view["roles"].values()) == sorted(s.role for s in group)
    assert view["received"]["spans"] == 2 * RUNS and view["received"]["runs"] == RUNS
    score = view["scores"]["answer-length"]
    assert score["count"] == RUNS and score["sum"] == pytest.approx(RUNS * 0.31)  # 31 characters / 100
    assert score["buckets"]["0.3"] == 0 and score["buckets"]["0.4"] == RUNS
    assert view["failures"]["scorers"]["always-fails"] == RUNS
    assert view["queue"]["dead"] == RUNS  # one dead letter per failed score
    assert {(b["backlog"], b["destination"]) for b in view["backlog"]} >= {("outbox", "otlp")}

    # The same token as the receivers: refused without it, on the endpoint and by the command.
    async with aiohttp.ClientSession() as session:
        async with session.get(url_of(front) + "/status") as resp:
            assert resp.status == 401
        async with session.get(url_of(front) + "/status", headers={"Authorization": "Bearer nope"}) as resp:
            assert resp.status == 401
    code, _, err = await cli("status", url_of(front), "--once", "--format", "json")
    assert code == 2 and "401" in err
    code, out, _ = await cli("status", url_of(front), "--once", env={"TRACESCORE_TOKEN": TOKEN})
    assert code == 0 and "answer-length" in out and "spans received" in out

    # Two URLs of one group: each replica counted once.
    twice = await status_json(*(url_of(s) for s in group), url_of(front))
    assert twice["received"] == {**view["received"], **{k: twice["received"][k] for k in twice["received"]
                                                         if k.endswith("_per_min")}}
    assert twice["scores"]["answer-length"]["count"] == RUNS

    # Prometheus: the score histogram per scorer, exported scores per scorer, build info,
    # process metrics, and no _created series.
    async with aiohttp.ClientSession() as session:
        texts = []
        for service in group:
            async with session.get(url_of(service) + "/metrics") as resp:
                texts.append(await resp.text())
    text = "\n".join(texts)
    assert f'tracescore_score_count{{scorer="answer-length"}} {RUNS}.0' in text
    assert re.search(r'tracescore_build_info\{.*version="', text)
    assert "process_resident_memory_bytes" in text
    assert "_created" not in text

    def exported() -> bool:
        return sum(s.metrics.registry.get_sample_value("tracescore_scores_exported_total",
                                                       {"scorer": "answer-length"}) or 0 for s in group) == RUNS

    await wait_until(exported, what="the exported-scores counter per scorer")
