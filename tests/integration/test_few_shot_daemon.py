"""Few-shot from labels end to end on Redis (SPEC §11): a receiver and two workers, in process, a
judge scorer with ``few_shot = 3`` and an adopted ``instructions_file`` asking the scripted
OpenAI-compatible server. Runs are scored (what the judge was shown is kept), people label them,
the set is chosen once for the deployment, and each worker's next judge request carries exactly
the instructions and the 3 balanced examples in the documented format; its score the new revision."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jsonschema  # noqa: F401  # the judge imports it at its first call: here, not with another thread's import under way
import llm_server  # tests/support: the fake OpenAI-compatible server
import pytest
from daemon_harness import delete_redis_keys, emit_agent_trace, wait_until
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from shared_redis import REDIS_URL

from collector.common.few_shot import ExampleSet
from collector.common.labels import IMPORTED, Label, judge_revision
from collector.config import config_from_dict
from collector.service import Service
from collector.work.registry import ScorerRegistry

SCORERS = Path(__file__).parent / "scorers_for_tests.py"
ADOPTED = "Judge only whether the answer helps the user.\nAnswer with a score from 0 to 1."
ANSWERS = ["It rains in Paris.", "Refunds take 5 days.", "I do not know.", "Call us.", "See the refund policy."]
VERDICTS = [True, True, True, False, False]  # labelled at 1..5 minutes ago, oldest first


@pytest.fixture
async def llm() -> AsyncIterator[Any]:
    from scorers._judge_transport import aclose_judge_clients

    server = await llm_server.LLMTestServer().start()
    yield server
    await aclose_judge_clients()
    await server.stop()


def _scored(service: Service) -> float:
    value = service.metrics.registry.get_sample_value("tracescore_decisions_total",
                                                      {"scorer": "helpful", "reason": "scored"})
    return value or 0.0


async def test_two_redis_workers_give_the_judge_the_same_three_balanced_examples(tmp_path: Path, llm: Any) -> None:
    prefix = f"test-fewshot-{uuid.uuid4().hex[:12]}:"
    (tmp_path / "helpful.toml").write_text(f'instructions = """{ADOPTED}"""\n')
    config = config_from_dict({
        "receiver": {"grpc_endpoint": "", "http_endpoint": "127.0.0.1:0"},
        "workers": {"http_endpoint": "", "concurrency": 1},  # one job each at a time: both judge
        "assembly": {"decision_wait": 0.2},
        "queue": {"url": REDIS_URL, "key_prefix": prefix},
        "labels": {"poll_s": 600},
        "scorers": [{"ref": f"{SCORERS}:judged", "args": {"api_base": llm.url + "/v1"}, "few_shot": 3,
                     "instructions_file": str(tmp_path / "helpful.toml")}],
    }, env={})
    registry = await asyncio.to_thread(ScorerRegistry.load, config.scorers)
    (entry,) = registry.entries
    services = [await asyncio.to_thread(Service, config, registry, role=role) for role in ("receiver", "worker", "worker")]
    receiver, *workers = services
    try:
        for service in services:
            await service.start()
        assert receiver.http is not None
        url = f"http://127.0.0.1:{receiver.http.port}/v1/traces"
        runs = [await asyncio.to_thread(emit_agent_trace, OTLPSpanExporter(endpoint=url, timeout=10), answer=answer)
                for answer in ANSWERS]
        store = receiver.store
        items = [f"span:{span_id}" for _, span_id in runs]
        await wait_until(lambda: _shown_all(store, items), timeout=60, what="what the judge was shown, kept")
        assert {r.message_text("system") for r in llm.requests} == {ADOPTED}  # no labels yet: no examples
        assert await store.kept_score_count() == 5

        now = time.time()
        labels = [Label("Helpful", trace_id, span_id, None, verdict, "file", annotator="ana",
                        rationale=f"reason {i}", at=now - 300 + 60 * i, source_id=f"labels.jsonl:{i + 1}")
                  for i, ((trace_id, span_id), verdict) in enumerate(zip(runs, VERDICTS, strict=True))]
        labels.append(Label("Helpful", "f" * 32, None, None, False, "file", at=now, source_id="labels.jsonl:6"))
        await store.put_labels(labels)  # the newest is a fail, but its judge's content was never kept
        await store.set_label_cursor(IMPORTED, str(now))  # as `tracescore labels import` does
        await receiver.agreement.refresh()  # a process of the deployment chooses (the receiver, or a worker's loop)
        await wait_until(lambda: store.label_cursor("@examples:helpful"), what="the deployment's example set")
        for worker in workers:
            await worker.few_shot.refresh()  # each worker reads the deployment's set (its loop does, every 5 s)

        expected = ADOPTED + "\n\n" + (
            "Examples judged by people: each gives the content a judge was shown, then the people's verdict and "
            "rationale.") + "".join(
            f'\n\n<example n="{n}">\n<content>\nAnswer: {ANSWERS[i]}\nRate it from 0 to 1.\n</content>\n'
            f"<verdict>{'pass' if VERDICTS[i] else 'fail'}</verdict>\n<rationale>reason {i}</rationale>\n</example>"
            for n, i in enumerate((2, 4, 1), 1))  # pass and fail in turn, newest first: 2, 4, then 1
        before = [_scored(worker) for worker in workers]
        llm.reset_stats()
        gate = asyncio.Event()
        llm.script(*[llm_server.Reply.json({"score": 0.9}).held(gate)] * 2)
        new = [await asyncio.to_thread(emit_agent_trace, OTLPSpanExporter(endpoint=url, timeout=10), answer=answer)
               for answer in ("New answer one.", "New answer two.")]
        await wait_until(lambda: llm.in_flight == 2, timeout=60, what="both workers' judge calls in flight")
        gate.set()
        await wait_until(lambda: sum(_scored(w) for w in workers) == sum(before) + 2, timeout=30, what="two scores")
        assert [_scored(w) - b for w, b in zip(workers, before, strict=True)] == [1, 1]  # one each
        assert [r.message_text("system") for r in llm.requests] == [expected, expected]
        assert sorted(r.message_text("user") for r in llm.requests) == [
            "Answer: New answer one.\nRate it from 0 to 1.", "Answer: New answer two.\nRate it from 0 to 1."]

        example_keys = [e.key for e in (await _stored(store)).examples]
        revision = judge_revision([("openai/gpt-4o-mini", ADOPTED)], example_keys)
        assert revision != entry.judge_revision
        await wait_until(lambda: _kept(store, 7), timeout=30, what="the new scores kept")
        by_span = {s.span_id: s.revision for batch in [b async for b in store.scan_kept_scores()] for s in batch}
        assert [by_span[span_id] for _, span_id in runs] == [entry.judge_revision] * 5
        assert [by_span[span_id] for _, span_id in new] == [revision] * 2
    finally:
        for service in services:
            await service.shutdown()
        await delete_redis_keys(REDIS_URL, prefix)


async def _shown_all(store: Any, items: list[str]) -> bool:
    return len(await store.shown("helpful", items)) == len(items)


async def _kept(store: Any, n: int) -> bool:
    return bool(await store.kept_score_count() == n)


async def _stored(store: Any) -> ExampleSet:
    return ExampleSet.from_json(await store.label_cursor("@examples:helpful"))
