"""`/status` and `tracescore status` against real daemons under a bounded load, on both
stores: the bearer token is required, the view has what the daemon measured, and a Redis
group (receiver and worker replicas) is seen whole from one URL, and once from two. The
score histogram holds the scores alone; a forward outage shows in the log, with its
endpoint and cause, and in the view (forward failures, the backlog's items and bytes
apart); ``--config`` finds the daemon's listener."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from daemon_harness import (
    CaptureBackend,
    agent_trace_body,
    delete_redis_keys,
    free_port,
    wait_until,
)
from prometheus_client.parser import text_string_to_metric_families
from serve_process import ServeProcess, cli
from shared_redis import REDIS_URL

from collector.config import config_from_dict, load_config
from collector.service import Service
from collector.work.registry import ScorerRegistry

SCORERS = Path(__file__).parent / "scorers_for_tests.py"
TOKEN = "s3cret-status"
RUNS = 24  # the bounded load: agent traces of two spans each, posted 8 at a time
PROTOBUF = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {TOKEN}"}


async def services(url: str, prefix: str, backend: str, *roles: str) -> list[Service]:
    config = config_from_dict({
        "receiver": {"grpc_endpoint": "", "http_endpoint": "127.0.0.1:0", "auth_token": TOKEN},
        "workers": {"http_endpoint": "127.0.0.1:0"},  # a worker's own listener
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


async def post_all(url: str, bodies: Sequence[bytes], headers: dict[str, str] = PROTOBUF) -> None:
    """Post OTLP/HTTP trace bodies to the daemon at ``url``, 8 at a time; each must be accepted."""
    semaphore = asyncio.Semaphore(8)
    async with aiohttp.ClientSession() as session:
        async def post(body: bytes) -> None:
            async with semaphore, session.post(url + "/v1/traces", data=body, headers=headers) as resp:
                assert resp.status == 200
        await asyncio.gather(*(post(body) for body in bodies))


async def load(service: Service) -> list[str]:
    bodies = [await asyncio.to_thread(agent_trace_body) for _ in range(RUNS)]
    await post_all(url_of(service), [body for body, _, _ in bodies])
    return [trace_id for _, trace_id, _ in bodies]


def column(table: str, header: str, row: str, width: int) -> str:
    """The ``width`` characters of a drawn rich table's row that starts with ``row`` (its first
    cell) under the column headed ``header`` (left-justified: the cell starts where the header does)."""
    lines = table.splitlines()
    start = next(line for line in lines if header in line).index(header)
    (found,) = [line for line in lines if re.match(rf"\W*{re.escape(row)}\s", line)]
    return found[start:start + width]


def metric(text: str, name: str, **labels: str) -> float:
    """One sample of a Prometheus text exposition (0 if absent)."""
    return next((s.value for family in text_string_to_metric_families(text) for s in family.samples
                 if s.name == name and s.labels == labels), 0.0)


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


ANSWERS = {5: 2, 31: 4, 95: 2}
"""Answer length -> runs: answer-length scores 0.05 (twice), 0.31 (4 times) and 0.95 (twice)."""
BUCKETS = {"0.0": 0, "0.1": 2, "0.2": 2, "0.3": 2, "0.4": 6, "0.5": 6, "0.6": 6, "0.7": 6, "0.8": 6, "0.9": 6,
           "1.0": 8, "+Inf": 8}
"""Those scores' cumulative buckets (``tracescore_score``'s bounds)."""
BAR = " ▄  █     ▄ "
"""Their histogram, one character per bucket: 2 in (0, 0.1], 4 in (0.3, 0.4], 2 in (0.9, 1.0]."""


async def test_the_score_histogram_counts_scores_and_nothing_else(group: list[Service]) -> None:
    """The scoring duration's histogram (seconds: buckets 0.005 ... 120) never mixes into the
    scores' (0..1), in the JSON and in the drawn table."""
    front = group[0]
    bodies = [await asyncio.to_thread(agent_trace_body, "x" * length)
              for length, runs in ANSWERS.items() for _ in range(runs)]
    await post_all(url_of(front), [body for body, _, _ in bodies])

    async def all_scored() -> bool:
        view = await status_json(url_of(front))
        return view["scores"].get("answer-length", {}).get("count") == len(bodies)

    await wait_until(all_scored, timeout=60, what="every run scored, as /status tells")
    view = await status_json(url_of(front))
    # A scorer that ran and never scored: an empty histogram.
    assert view["scores"]["always-fails"] == {"count": 0, "sum": 0, "buckets": dict.fromkeys(BUCKETS, 0)}
    score = view["scores"]["answer-length"]
    assert score["buckets"] == BUCKETS
    assert score["count"] == len(bodies) and score["sum"] == pytest.approx(2 * 0.05 + 4 * 0.31 + 2 * 0.95)

    code, out, err = await cli("status", url_of(front), "--once", "--token", TOKEN)
    assert code == 0, err
    assert column(out, "histogram 0..1", "answer-length", len("histogram 0..1")) == BAR + "  "
    assert column(out, "histogram 0..1", "always-fails", len("histogram 0..1")).strip() == ""


FORWARDED = 5
"""Agent traces received during the forward outage (one request each)."""


async def test_a_forward_outage_shows_in_the_log_and_in_status(tmp_path: Path) -> None:
    """A real ``tracescore serve`` whose export endpoint is down: one warning naming the endpoint
    and the gRPC status, forward failures in the view beside the score export failures, the
    backlog's items and bytes apart; once the endpoint is up, one line saying it recovered,
    after how long and how many retries (the metric's count)."""
    backend = CaptureBackend(port=free_port())  # held, not started: the endpoint is down
    http_port = free_port()
    config = tmp_path / "tracescore.toml"
    config.write_text(
        f'[receiver]\ngrpc_endpoint = ""\nhttp_endpoint = "127.0.0.1:{http_port}"\n'
        f'[assembly]\ndecision_wait = 0.2\n[queue]\nurl = "sqlite:///{tmp_path / "queue.db"}"\n'
        f'[export]\nendpoint = "{backend.endpoint}"\ntimeout_s = 2.0\nmax_backoff_s = 0.5\n'
        f'[[scorers]]\nref = "{SCORERS}:answer_length"\n')
    process = ServeProcess(config, tmp_path / "serve.log", http_port)
    url = f"http://127.0.0.1:{http_port}"

    def forward_log() -> list[str]:
        return [line for line in process.log.read_text().splitlines() if " collector.export.forward: " in line]

    async def retried() -> float:
        return metric(await process.metrics(), "tracescore_forwarded_requests_total", signal="traces",
                      outcome="retried")

    async def backlog_items() -> float:
        return metric(await process.metrics(), "tracescore_backlog_items", backlog="forward", destination="otlp")

    try:
        await process.start()
        bodies = [(await asyncio.to_thread(agent_trace_body))[0] for _ in range(FORWARDED)]
        await post_all(url, bodies, {"Content-Type": "application/x-protobuf"})

        async def held() -> bool:  # every request in the backlog, as the stats loop last counted
            return await backlog_items() == FORWARDED

        await wait_until(held, what="the forward backlog holding every request")
        before = await retried()

        async def two_more_attempts() -> bool:  # each failed attempt carries the whole backlog
            return await retried() >= before + 2 * FORWARDED

        await wait_until(two_more_attempts, what="two more failed attempts")
        (warning,) = forward_log()  # one line for the whole outage, not one per attempt
        assert re.search(rf" WARNING collector\.export\.forward: forwarding to {re.escape(backend.endpoint)} "
                         r"\(grpc\) failed: gRPC UNAVAILABLE: .*Connection refused.*; received requests are kept",
                         warning), warning

        view = await status_json(url, token=None)
        assert view["failures"]["forward"]["retried"] >= before + 2 * FORWARDED
        assert view["failures"]["forward"]["rejected"] == 0
        (sending,) = [s for s in view["sending"] if s["sender"] == "forward"]  # an outage, not a hold
        assert (sending["state"], sending["destination"]) == ("retrying", f"{backend.endpoint} (grpc)")
        assert sending["cause"].startswith("gRPC UNAVAILABLE") and sending["fix"] is None
        (forward,) = [b for b in view["backlog"] if b["backlog"] == "forward"]
        size = sum(len(body) for body in bodies)
        assert forward == {"backlog": "forward", "destination": "otlp", "items": FORWARDED, "bytes": size}
        assert (view["queue"]["forward_requests"], view["queue"]["forward_bytes"]) == (FORWARDED, size)
        code, out, err = await cli("status", url, "--once")
        assert code == 0, err
        failures = re.search(r"forward failures\W+([\d,]+)", out)
        assert failures and int(failures.group(1).replace(",", "")) >= before + 2 * FORWARDED, out
        assert "score export failures" in out
        assert re.search(r"│ forward +│ " + re.escape(backend.endpoint) + r".*│ retrying", out), out  # the senders' table
        assert re.search(rf"│ forward +│ otlp +│ +{FORWARDED} │ +{size:,} │", out), out

        await backend.start()  # the same port: the endpoint is up
        await wait_until(lambda: len(forward_log()) == 2, what="the line saying forwarding recovered")
        recovered = forward_log()[1]
        match = re.search(rf" WARNING collector\.export\.forward: forwarding to {re.escape(backend.endpoint)} "
                          r"\(grpc\) recovered after ([\d.]+) s and (\d+) failed attempts \((\d+) requests "
                          r"retried\); last error: gRPC UNAVAILABLE: ", recovered)
        assert match, recovered
        assert int(match.group(2)) >= 3 and float(match.group(1)) > 0
        assert int(match.group(3)) == await retried()  # every retry of the daemon's life was in this outage

        async def drained() -> bool:
            view = await status_json(url, token=None)
            (forward,) = [b for b in view["backlog"] if b["backlog"] == "forward"]
            return forward["items"] == 0 and forward["bytes"] == 0

        await wait_until(drained, what="the forward backlog, items and bytes, empty in the view")
        view = await status_json(url, token=None)
        assert view["failures"]["forward"]["retried"] == int(match.group(3))
        assert await process.stop() == 0
    finally:
        await process.kill()
        await backend.stop()


async def test_status_finds_the_daemon_through_its_config(tmp_path: Path) -> None:
    """``--config``: the ``[receiver] http_endpoint`` (0.0.0.0 reached on 127.0.0.1) and its
    bearer token, with no URL and no token given; a configuration without an HTTP listener is
    refused, naming the key."""
    port = free_port()
    config = tmp_path / "tracescore.toml"
    config.write_text(f'[receiver]\ngrpc_endpoint = ""\nhttp_endpoint = "0.0.0.0:{port}"\nauth_token = "{TOKEN}"\n'
                      f'[queue]\nurl = "sqlite:///{tmp_path / "queue.db"}"\n')
    service = await asyncio.to_thread(Service, await asyncio.to_thread(load_config, config), ScorerRegistry([]))
    await service.start()
    try:
        code, out, err = await cli("status", "--config", str(config), "--once", "--format", "json")
        assert code == 0, err
        assert json.loads(out)["replicas"] == [service.status.replica]
        code, out, err = await cli("status", "-c", str(config), "--once")
        assert code == 0 and f"from http://127.0.0.1:{port}" in out, err
    finally:
        await service.shutdown()

    grpc_only = tmp_path / "grpc-only.toml"
    grpc_only.write_text(f'[receiver]\ngrpc_endpoint = "127.0.0.1:{free_port()}"\nhttp_endpoint = ""\n')
    code, out, err = await cli("status", "--config", str(grpc_only), "--once")
    assert code == 2 and out == "", (out, err)
    assert "receiver.http_endpoint is empty: the daemon has no HTTP listener" in err
