"""The judge governor (SPEC §8) on the real SQLite store's ledger, with real judge scorers run
by the real worker against the loopback OpenAI-compatible server: budgets reserved before a
call and settled after it, parking (attempts untouched) and its dead letter after
``max_park_s``, the breaker opened by a 401 and closed by a probe, a 429's cool-down, unpriced
models under a budget."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import llm_server  # tests/support (pytest pythonpath): the fake OpenAI-compatible server
import pytest

from collector.common.judge_types import Park
from collector.common.metrics import Metrics
from collector.common.types import Dead, Done, RunRecord, ScoreJob
from collector.config import BudgetsConfig, JudgeConfig, ScorerConfig, WorkersConfig
from collector.store.sqlite.store import SqliteStore
from collector.work.governor import JudgeGovernance, judge_report
from collector.work.registry import RegisteredScorer, ScorerRegistry
from collector.work.worker import Worker
from scorers import Judge, create_scorer

RUN = RunRecord(trace_id="ab" * 16, span_id="cd" * 8, span_name="invoke_agent a", service="svc",
                input={"input_messages": [{"role": "user", "content": "Hi"}]},
                output=[{"role": "assistant", "content": "Hello there"}])
PROMPT = "Rate the answer. " * 400  # ~1,600 tokens: 0.00024 USD at gpt-4o-mini's input price


@pytest.fixture
async def llm() -> AsyncIterator[Any]:
    from scorers._judge_transport import aclose_judge_clients

    server = await llm_server.LLMTestServer().start()
    server.default = llm_server.Reply.json(
        {"score": 0.5}, usage={"prompt_tokens": 1600, "completion_tokens": 10, "total_tokens": 1610})
    yield server
    await aclose_judge_clients()
    await server.stop()


def _scorer(llm: Any, scorer_id: str = "judged", model: str = "openai/gpt-4o-mini") -> Any:
    judge = Judge(model=model, instructions="Grade.",
                  model_settings={"api_base": llm.url + "/v1", "api_key": "k", "max_tokens": 20})
    return create_scorer(id=scorer_id, description="d", type="agent", judge=judge).generate_score(
        description="score", create_prompt=lambda run: PROMPT)


async def _setup(tmp_path: Path, scorer: Any, judge: JudgeConfig, *, jobs: int = 1,
                 workers: WorkersConfig | None = None, max_park_s: float = 3600.0,
                 ) -> tuple[SqliteStore, Worker, JudgeGovernance]:
    store = SqliteStore(str(tmp_path / "q.db"), max_attempts=2)
    await store.start()
    governance = JudgeGovernance(store, judge, workers or WorkersConfig(), Metrics())
    registry = ScorerRegistry([RegisteredScorer(scorer, ScorerConfig(ref=f"x:{scorer.id}"))])
    worker = Worker(store, registry, Metrics(), max_attempts=2, governor=governance, max_park_s=max_park_s)
    runs = [RunRecord(trace_id=f"{i:032x}", span_id="cd" * 8, input=RUN.input, output=RUN.output) for i in range(jobs)]
    await store.put([ScoreJob(run, scorer.id, scorer.version) for run in runs])
    return store, worker, governance


async def _process_one(store: SqliteStore, worker: Worker) -> Any:
    (leased,) = await store.take(1)
    outcome = await worker.process(leased)
    await store.settle(leased, outcome)
    return leased, outcome


async def test_a_budget_lets_calls_through_until_the_next_would_cross_it(tmp_path: Path, llm: Any) -> None:
    # Each call reserves ~1,600 prompt tokens + 20 output tokens (~0.000252 USD) and costs 0.000246.
    judge = JudgeConfig(budgets=BudgetsConfig(usd=0.001))
    store, worker, governance = await _setup(tmp_path, _scorer(llm), judge, jobs=6)
    outcomes = [(await _process_one(store, worker))[1] for _ in range(6)]
    assert [type(o) for o in outcomes] == [Done] * 4 + [Park] * 2  # 4 x 0.000246 = 0.000984; a 5th would cross
    assert outcomes[-1].reason == "budget_exhausted" and outcomes[-1].delay_s <= judge.park_recheck_s
    assert len(llm.requests) == 4
    report = await judge_report(store, judge)
    (budget,) = report["budgets"]
    assert budget["scope"] == "global" and budget["reserved"] == 0
    assert budget["spent"] == pytest.approx(4 * (1600 * 0.15e-6 + 10 * 0.6e-6))
    assert report["parked"]["budget_exhausted"] == 2
    await store.shutdown()


async def test_a_parked_job_keeps_its_attempts_and_is_dead_lettered_after_max_park_s(tmp_path: Path, llm: Any) -> None:
    judge = JudgeConfig(budgets=BudgetsConfig(by_scorer={"judged": 1e-9}), park_recheck_s=0.05)
    store, worker, _ = await _setup(tmp_path, _scorer(llm), judge, max_park_s=3.0)
    before = time.time()
    first, outcome = await _process_one(store, worker)  # the first call may load the tokenizer
    after = time.time()
    assert isinstance(outcome, Park) and first.attempt == 1
    assert first.parked_since is None  # the park is recorded when the settlement lands
    await asyncio.sleep(0.12)  # the shortest park is 0.1 s
    for _ in range(3):  # max_attempts is 2: a take that counted would have dead-lettered it
        leased, outcome = await _process_one(store, worker)
        assert isinstance(outcome, Park) and leased.attempt == 1, outcome
        assert leased.parked_since is not None and before <= leased.parked_since <= after + 0.5
        await asyncio.sleep(0.12)
    assert leased.parked_since is not None
    await asyncio.sleep(max(0.0, leased.parked_since + 3.05 - time.time()))  # max_park_s after the first park
    leased, outcome = await _process_one(store, worker)
    assert isinstance(outcome, Dead) and outcome.error_type == "budget_exhausted", outcome
    assert "scorer:judged judge budget" in outcome.message
    (letter,) = await store.dead_letters()
    assert "budget_exhausted" in str(letter["error"])
    assert not llm.requests
    await store.shutdown()


async def test_a_401_opens_the_breaker_parks_without_calling_and_a_probe_closes_it(tmp_path: Path, llm: Any) -> None:
    judge = JudgeConfig(probe_interval_s=0.3)
    store, worker, governance = await _setup(tmp_path, _scorer(llm), judge, jobs=3)
    llm.script(llm_server.Reply.error(401, message="Incorrect API key provided: sk-***", code="invalid_api_key"))
    _, first = await _process_one(store, worker)
    assert isinstance(first, Park) and first.reason == "judge_unavailable"
    (breaker,) = await store.judge_breakers()
    assert breaker.model == "openai/gpt-4o-mini" and breaker.reason == "401 authentication refused"
    model, digest = breaker.key.split("#")  # the credentials' digest, never the key
    assert model == "openai/gpt-4o-mini" and len(digest) == 12 and int(digest, 16) >= 0
    _, second = await _process_one(store, worker)  # the breaker is open: nothing is sent
    assert isinstance(second, Park) and len(llm.requests) == 1
    await asyncio.sleep(0.35)  # the probe is due: the next job's call is the probe, and succeeds
    _, probe = await _process_one(store, worker)
    assert isinstance(probe, Done) and len(llm.requests) == 2
    assert await store.judge_breakers() == [] and not (await governance.breakers(fresh=True))
    await store.shutdown()


async def test_a_failed_probe_doubles_the_interval(tmp_path: Path, llm: Any) -> None:
    judge = JudgeConfig(probe_interval_s=0.2)
    store, worker, _ = await _setup(tmp_path, _scorer(llm), judge, jobs=2)
    refused = llm_server.Reply.error(403, message="permission denied")
    llm.script(refused, refused)
    await _process_one(store, worker)
    (opened,) = await store.judge_breakers()
    await asyncio.sleep(0.25)
    _, outcome = await _process_one(store, worker)  # the probe, refused again
    assert isinstance(outcome, Park)
    (again,) = await store.judge_breakers()
    assert again.interval_s == pytest.approx(0.4) and again.since == opened.since
    assert again.reason == "403 permission denied"
    await store.shutdown()


async def test_a_429_with_retry_after_cools_the_model_down(tmp_path: Path, llm: Any) -> None:
    store, worker, governance = await _setup(tmp_path, _scorer(llm), JudgeConfig(), jobs=2)  # no rate limits
    llm.script(llm_server.Reply.error(429, headers={"retry-after": "1"}))
    _, outcome = await _process_one(store, worker)
    assert type(outcome).__name__ == "Retry"
    wait = await store.take_judge_rate("openai/gpt-4o-mini", 0, 0, 0)
    assert 0.5 < wait <= 1.0  # every replica waits out the Retry-After
    await asyncio.sleep(wait)  # the retried job is sent once the cool-down is over, not before
    started = time.monotonic()
    _, outcome = await _process_one(store, worker)
    assert isinstance(outcome, Done) and len(llm.requests) == 2 and time.monotonic() - started < 1.0
    await store.shutdown()


async def test_an_unpriced_model_under_a_budget_is_refused_unless_allowed(tmp_path: Path, llm: Any) -> None:
    unpriced = _scorer(llm, model="hosted_vllm/my-local-model")
    store, worker, _ = await _setup(tmp_path, unpriced, JudgeConfig(budgets=BudgetsConfig(usd=1.0)))
    _, outcome = await _process_one(store, worker)
    assert isinstance(outcome, Dead) and "has no known price" in outcome.message and not llm.requests
    await store.shutdown()
    (tmp_path / "allowed").mkdir()
    store, worker, _ = await _setup(tmp_path / "allowed", unpriced,
                                    JudgeConfig(unpriced="allow", budgets=BudgetsConfig(usd=1.0)))
    _, outcome = await _process_one(store, worker)
    assert isinstance(outcome, Done) and len(llm.requests) == 1
    await store.shutdown()
