"""Judge agreement end to end on a Redis deployment of two daemons (SPEC §11): agent traces in
over OTLP, scored and kept; people's labels in Langfuse (the loopback test server of its public
API) pulled once for the deployment, ``labels pull`` again adding nothing; ``agreement --json``
equal to kappa, accuracy and the confusion matrix counted here from the same verdicts; both
daemons' ``/metrics`` and ``/status`` showing them; ``gate --min-kappa``; ``labels import`` and
``labels list`` with bad input."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import time
import uuid
from pathlib import Path

import aiohttp
import pytest
from daemon_harness import delete_redis_keys, emit_agent_trace, free_port, wait_until
from langfuse_server import LangfuseServer
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from collector.cli import main
from collector.common.labels import PULLED
from collector.config import load_config
from collector.service import Service
from collector.work.registry import ScorerRegistry

SCORERS = Path(__file__).parent / "scorers_for_tests.py"
REDIS_URL = "redis://127.0.0.1:6379/0"
NAME = "Answer length"  # the scorer's name: its scores' and its labels'
LONG, SHORT = "x" * 60, "short"  # answer_length: 0.6 (pass at 0.5) and 0.05 (fail)
JUDGED = [LONG] * 7 + [SHORT] * 5
ANA = [True, True, True, True, True, False, True, False, False, False, False, True]
BEN = [True, True, True, True, True, True, False, False, False, False, False, True]  # differs on 5 and 6


def kappa(a: list[str], b: list[str]) -> float:
    """Cohen's kappa of two raters, counted by hand."""
    n = len(a)
    agree = sum(x == y for x, y in zip(a, b, strict=True)) / n
    chance = sum((a.count(c) / n) * (b.count(c) / n) for c in set(a) | set(b))
    return (agree - chance) / (1 - chance)


async def cli(*args: str) -> tuple[int, str, str]:
    """``tracescore ARGS`` in a thread of this process (its own event loop; the daemons serve on
    this one): its exit code, stdout and stderr."""
    def run() -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
        return code, out.getvalue(), err.getvalue()

    return await asyncio.wait_for(asyncio.to_thread(run), 60)  # a failure detector


async def metrics_of(port: int) -> str:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/metrics") as reply:
        return await reply.text()


async def status_of(port: int) -> dict:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/status") as reply:
        (own, *_) = (await reply.json())["replicas"]
        return dict(own)


async def test_two_daemons_pull_labels_once_and_report_the_agreement_counted_here(
    tmp_path: Path, langfuse: LangfuseServer,
) -> None:
    prefix = f"test-labels-{uuid.uuid4().hex[:12]}:"
    ports = [free_port(), free_port()]
    configs = []
    for i, port in enumerate(ports):
        path = tmp_path / f"ts{i}.toml"
        path.write_text(
            f'[receiver]\ngrpc_endpoint = ""\nhttp_endpoint = "127.0.0.1:{port}"\n'
            f'[assembly]\ndecision_wait = 0.2\n[queue]\nurl = "{REDIS_URL}"\nkey_prefix = "{prefix}"\n'
            f'[sinks.langfuse]\nhost = "{langfuse.url}"\npublic_key = "{langfuse.public_key}"\n'
            f'secret_key = "{langfuse.secret_key}"\n'
            f'[labels]\nfrom = ["langfuse"]\npoll_s = 600\nmin_labels = 10\n'
            f'[[scorers]]\nref = "{SCORERS}:answer_length"\n')
        configs.append(path)
    services = []
    try:
        for path, role in zip(configs, ("all", "receiver"), strict=True):
            config = await asyncio.to_thread(load_config, str(path))
            services.append(Service(config, await asyncio.to_thread(ScorerRegistry.load, config.scorers), role=role))
            await services[-1].start()
        store = services[0].store
        # Both daemons want a pull at start; the lease and the shared last-pull record let one.
        await wait_until(lambda: store.label_cursor(PULLED), what="the deployment's first label pull")
        first = json.loads(await store.label_cursor(PULLED) or "{}")
        await asyncio.sleep(1.0)  # the other daemon has checked by now (it started before the wait)
        assert len(langfuse.score_queries) == 1, langfuse.score_queries
        assert json.loads(await store.label_cursor(PULLED) or "{}") == first

        url = f"http://127.0.0.1:{ports[0]}/v1/traces"
        runs = [await asyncio.to_thread(emit_agent_trace, OTLPSpanExporter(endpoint=url, timeout=10), answer=answer)
                for answer in JUDGED]
        await wait_until(lambda: _count(store), timeout=60, what="twelve kept scores")

        # People label the runs in Langfuse (ANNOTATION scores on the run's observation); Ben
        # labels after Ana, so where they differ the item's verdict is his (the newest: a tie).
        for who, verdicts, at in (("ana", ANA, time.time() - 60), ("ben", BEN, time.time() - 30)):
            for (trace_id, span_id), verdict in zip(runs, verdicts, strict=True):
                langfuse.add_score(NAME, 1 if verdict else 0, data_type="BOOLEAN", trace_id=trace_id,
                                   observation_id=span_id, author=who, comment=f"{who}'s call", timestamp=at,
                                   updated_at=at)
        langfuse.add_score(NAME, 1, data_type="BOOLEAN", trace_id="f" * 32, author="ana")  # never scored
        langfuse.add_score(NAME, "maybe", data_type="CATEGORICAL", trace_id=runs[0][0], observation_id=runs[0][1],
                           author="cat")  # no verdict of a pass/fail scorer
        langfuse.add_score(NAME, 0.1, source="API", trace_id=runs[0][0], observation_id=runs[0][1])  # not a person's

        code, out, err = await cli("labels", "pull", "--config", str(configs[1]))
        assert code == 0 and out == "langfuse: 26 label(s) read, 26 new or changed\n", (out, err)
        code, out, _ = await cli("labels", "pull", "--config", str(configs[1]))
        assert code == 0 and out == "langfuse: 0 label(s) read, 0 new or changed\n"  # nothing twice

        code, out, err = await cli("agreement", "--json", "--disagreements", "--config", str(configs[0]))
        assert code == 0, err
        (row,) = [json.loads(line) for line in out.splitlines()]
        judge = ["pass" if answer == LONG else "fail" for answer in JUDGED]
        human = ["pass" if verdict else "fail" for verdict in BEN]
        assert (row["scorer"], row["version"], row["revision"], row["n"], row["n_scored"]) == (
            "answer-length", "1", "", 12, 12)
        assert row["accuracy"] == pytest.approx(sum(h == j for h, j in zip(human, judge, strict=True)) / 12, abs=1e-4)
        assert row["kappa"] == pytest.approx(kappa(human, judge), abs=1e-4)
        assert row["kappa_ci"][0] <= row["kappa"] <= row["kappa_ci"][1]
        assert row["confusion"] == {h: {j: sum(1 for x, y in zip(human, judge, strict=True) if (x, y) == (h, j))
                                        for j in ("pass", "fail")} for h in ("pass", "fail")}
        assert row["annotators_kappa"] == pytest.approx(
            kappa(["pass" if v else "fail" for v in ANA], human), abs=1e-4)
        assert row["mae"] is None  # boolean labels: no numeric errors
        disagreeing = {(d["trace_id"], d["span_id"]) for d in row["disagreements"]}
        assert disagreeing == {run for run, h, j in zip(runs, human, judge, strict=True) if h != j}

        # Both daemons measured again after the pull (by another process) and show the same figures.
        kappa_line = 'tracescore_judge_agreement{metric="kappa",revision="",scorer="answer-length",version="1"}'
        for port in ports:  # measured again after the second pull (the last pull its status shows)
            await wait_until(lambda p=port: _second_pull_seen(p), timeout=30, what="the second pull on /status")
            await wait_until(lambda p=port: _has(p, kappa_line), timeout=30, what="the kappa on /metrics")
            text = await metrics_of(port)
            assert float(_value(text, kappa_line)) == pytest.approx(row["kappa"], abs=1e-4)
            assert _value(text, 'tracescore_labels_total{scorer="answer-length",source="langfuse"}') == "26.0"
            labels = (await status_of(port))["labels"]
            assert labels["labels"] == {"answer-length": {"langfuse": 26}} and labels["unmatched"] == {NAME: 1}
            assert [s["n"] for s in labels["series"]] == [12] and labels["unreadable"] == 1
            assert labels["last_pull"]["sources"][0]["added"] == 0  # the second pull's

        assert (await cli("gate", "--min-kappa", "0.99", "--config", str(configs[0])))[0] == 1
        code, out, _ = await cli("gate", "--min-kappa", str(round(row["kappa"] - 0.01, 3)), "--config",
                                 str(configs[0]))
        assert code == 0 and out.startswith("ok: answer-length (version 1, revision -): kappa")

        bad = tmp_path / "labels.jsonl"
        bad.write_text(json.dumps({"trace_id": runs[0][0], "span_id": runs[0][1], "name": NAME, "value": True})
                       + "\n{not json\n")
        code, _, err = await cli("labels", "import", str(bad), "--config", str(configs[0]))
        assert code == 2 and f"{bad}:2: " in err and "nothing of" in err
        code, out, _ = await cli("labels", "list", "--config", str(configs[0]))
        assert code == 0 and out.endswith("26 label(s); 1 cannot be read as a verdict\n")
        assert "UNREADABLE: 'maybe' is not a pass/fail word" in out
    finally:
        for service in services:
            await service.shutdown()
        await delete_redis_keys(REDIS_URL, prefix)


async def _count(store: object) -> bool:
    return await store.kept_score_count() == 12  # type: ignore[attr-defined]


async def _second_pull_seen(port: int) -> bool:
    last = ((await status_of(port)).get("labels") or {}).get("last_pull") or {}
    return [s["added"] for s in last.get("sources", [])] == [0]


async def _has(port: int, line: str) -> bool:
    return f"\n{line} " in await metrics_of(port)


def _value(text: str, line: str) -> str:
    (found,) = [row.rsplit(" ", 1)[1] for row in text.splitlines() if row.startswith(f"{line} ")]
    return found
