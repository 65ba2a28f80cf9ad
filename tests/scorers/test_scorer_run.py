"""Running scorers: order, injection, prepare_run, results, errors, not_scorable (SPEC §1.1-1.2)."""

from __future__ import annotations

import asyncio
import math
import threading
import uuid
from typing import Any

import pytest

from scorers import (
    NotScorable,
    ScorerDefinitionError,
    ScorerResult,
    ScorerRun,
    ScorerRunError,
    StepResults,
    create_scorer,
    not_scorable,
)


def recorder() -> tuple[list[str], Any]:
    calls: list[str] = []

    def make(name: str, value: Any) -> Any:
        def step(**kw: Any) -> Any:
            calls.append(name)
            return value

        return step

    return calls, make


# -- order and injection -------------------------------------------------------------------


async def test_steps_run_in_canonical_order_whatever_the_chaining_order() -> None:
    calls, make = recorder()
    scorer = (
        create_scorer(id="s", description="d")
        .generate_reason(make("generate_reason", "why"))
        .analyze(make("analyze", {"a": 1}))
        .generate_score(make("generate_score", 0.5))
        .preprocess(make("preprocess", {"p": 1}))
    )
    result = await scorer.run(input="i", output="o")
    assert calls == ["preprocess", "analyze", "generate_score", "generate_reason"]
    assert (result.preprocess_step_result, result.analyze_step_result) == ({"p": 1}, {"a": 1})
    assert (result.score, result.reason) == (0.5, "why")


async def test_each_step_sees_the_results_of_earlier_steps() -> None:
    seen: dict[str, StepResults] = {}

    def analyze(results: StepResults) -> str:
        seen["analyze"] = results
        return "analysis"

    def score(results: StepResults) -> float:
        seen["score"] = results
        return 0.25

    def reason(run: ScorerRun[Any, Any], results: StepResults, score: float) -> str:
        seen["reason"] = results
        return f"{run.output}:{score}:{results.analyze_step_result}"

    scorer = (
        create_scorer(id="s", description="d")
        .preprocess(lambda run: run.input.upper())
        .analyze(analyze)
        .generate_score(score)
        .generate_reason(reason)
    )
    result = await scorer.run(input="hi", output="out")
    assert seen["analyze"] == StepResults(preprocess_step_result="HI")
    assert seen["score"].analyze_step_result == "analysis"
    assert seen["reason"].generate_score_step_result == 0.25
    assert result.reason == "out:0.25:analysis"


async def test_kwargs_function_receives_every_keyword() -> None:
    received: dict[str, Any] = {}

    def reason(**kw: Any) -> str:
        received.update(kw)
        return "r"

    scorer = (
        create_scorer(id="s", description="d").generate_score(lambda: 1).generate_reason(reason)
    )
    await scorer.run(output="o")
    assert set(received) == {"run", "results", "score"}
    assert received["score"] == 1.0 and isinstance(received["run"], ScorerRun)
    assert received["results"] == StepResults(generate_score_step_result=1.0)  # made for it: it takes every keyword


async def test_only_declared_keywords_are_passed() -> None:
    scorer = create_scorer(id="s", description="d").generate_score(lambda results: 0.1)
    assert (await scorer.run()).score == 0.1


async def test_async_steps_and_async_callable_objects() -> None:
    async def analyze(run: ScorerRun[Any, Any]) -> int:
        await asyncio.sleep(0)
        return len(run.output)

    class Score:
        async def __call__(self, results: StepResults) -> float:
            return results.analyze_step_result / 10

    scorer = create_scorer(id="s", description="d").analyze(analyze).generate_score(Score())
    assert (await scorer.run(output="abcde")).score == 0.5


async def test_sync_step_returning_an_awaitable_is_awaited() -> None:
    async def compute() -> float:
        return 0.75

    scorer = create_scorer(id="s", description="d").generate_score(lambda: compute())
    assert (await scorer.run()).score == 0.75


async def test_sync_steps_run_off_the_event_loop_thread() -> None:
    threads: list[int] = []

    def score() -> float:
        threads.append(threading.get_ident())
        return 1.0

    scorer = create_scorer(id="s", description="d").generate_score(score)
    await scorer.run()
    assert threads and threads[0] != threading.get_ident()


# -- the run -------------------------------------------------------------------------------


@pytest.mark.parametrize("run_id", [None, ""])
async def test_missing_or_empty_run_id_becomes_a_uuid4(run_id: str | None) -> None:
    scorer = create_scorer(id="s", description="d").generate_score(lambda run: 1.0)
    result = await scorer.run(run_id=run_id)
    assert uuid.UUID(result.run_id).version == 4


async def test_run_fields_reach_steps_and_result() -> None:
    seen: list[ScorerRun[Any, Any]] = []

    def score(run: ScorerRun[Any, Any]) -> float:
        seen.append(run)
        return 1.0

    scorer = create_scorer(id="s", description="d").generate_score(score)
    result = await scorer.run(
        input="in",
        output="out",
        ground_truth="gt",
        run_id="r-1",
        request_context={"user": "u1"},
        trace_id="ab" * 16,
        span_id="cd" * 8,
    )
    run = seen[0]
    assert (run.input, run.output, run.ground_truth, run.run_id) == ("in", "out", "gt", "r-1")
    assert (run.request_context, run.trace_id, run.span_id) == ({"user": "u1"}, "ab" * 16, "cd" * 8)
    assert isinstance(result, ScorerResult)
    assert (result.input, result.output, result.ground_truth, result.run_id) == (
        "in",
        "out",
        "gt",
        "r-1",
    )
    assert (result.request_context, result.trace_id, result.span_id) == (
        {"user": "u1"},
        "ab" * 16,
        "cd" * 8,
    )
    assert result.judge == {} and result.not_scorable is None
    assert result.preprocess_prompt is None and result.generate_score_prompt is None


async def test_request_context_defaults_to_empty_dict() -> None:
    scorer = create_scorer(id="s", description="d").generate_score(lambda: 1)
    assert (await scorer.run()).request_context == {}


async def test_a_whole_scorer_run_can_be_passed_as_input() -> None:
    scorer = create_scorer(id="s", description="d").generate_score(lambda run: len(run.output))
    result = await scorer.run(ScorerRun(output="abc", run_id="given"))
    assert (result.score, result.run_id) == (3.0, "given")
    with pytest.raises(TypeError, match="give no other argument"):
        await scorer.run(ScorerRun(output="abc"), output="x")


async def test_invalid_request_context_fails_the_run_clearly() -> None:
    scorer = create_scorer(id="s", description="d").generate_score(lambda: 1)
    with pytest.raises(ScorerRunError, match="request_context") as info:
        await scorer.run(request_context=["not", "a", "dict"])  # type: ignore[arg-type]
    assert info.value.failed_step is None


def test_run_sync_from_a_script() -> None:
    scorer = create_scorer(id="s", description="d").generate_score(lambda run: 0.5)
    assert scorer.run_sync(input="i", output="o").score == 0.5


async def test_run_sync_inside_a_running_loop_still_returns_the_result() -> None:
    """As in a notebook cell: the caller's loop is running, run_sync uses a helper thread."""
    outer_loop = asyncio.get_running_loop()
    seen_loops: list[asyncio.AbstractEventLoop] = []

    async def score(run: ScorerRun[Any, Any]) -> float:
        seen_loops.append(asyncio.get_running_loop())
        return 0.5 if run.output == "o" else 0.0

    scorer = create_scorer(id="s", description="d").generate_score(score)
    assert scorer.run_sync(input="i", output="o").score == 0.5
    assert seen_loops and seen_loops[0] is not outer_loop


# -- prepare_run ---------------------------------------------------------------------------


async def test_prepare_run_replaces_the_run_once_before_the_first_step() -> None:
    prepared: list[str] = []

    def prepare(run: ScorerRun[Any, Any]) -> ScorerRun[Any, Any]:
        prepared.append(run.run_id)
        return run.model_copy(update={"output": run.output.strip(), "ground_truth": None})

    scorer = (
        create_scorer(id="s", description="d", prepare_run=prepare)
        .analyze(lambda run: run.output)
        .generate_score(lambda run: len(run.output))
    )
    result = await scorer.run(output="  abc  ", ground_truth="gt", run_id="r")
    assert prepared == ["r"]
    assert (result.analyze_step_result, result.score) == ("abc", 3.0)
    assert (result.output, result.ground_truth) == ("abc", None)


async def test_async_prepare_run() -> None:
    async def prepare(run: ScorerRun[Any, Any]) -> ScorerRun[Any, Any]:
        return run.model_copy(update={"output": "prepared"})

    scorer = create_scorer(id="s", description="d", prepare_run=prepare).generate_score(
        lambda run: float(run.output == "prepared")
    )
    assert (await scorer.run(output="raw")).score == 1.0


async def test_prepare_run_returning_a_dict_is_coerced() -> None:
    scorer = create_scorer(
        id="s", description="d", prepare_run=lambda run: {"output": "x", "groundTruth": "g"}
    ).generate_score(lambda run: len(run.output))
    result = await scorer.run(
        input="dropped", output="long output", run_id="keep", trace_id="t1", span_id="s1"
    )
    assert (result.score, result.input, result.ground_truth) == (1.0, None, "g")
    # identity fields the dict leaves out are kept from the run
    assert (result.run_id, result.trace_id, result.span_id) == ("keep", "t1", "s1")


async def test_prepare_run_dict_may_set_identity_fields() -> None:
    scorer = create_scorer(
        id="s", description="d", prepare_run=lambda run: {"run_id": "new", "trace_id": None}
    ).generate_score(lambda: 1)
    result = await scorer.run(run_id="old", trace_id="t1")
    assert (result.run_id, result.trace_id) == ("new", None)


async def test_prepare_run_returning_garbage_fails_with_prepare_run_step() -> None:
    scorer = create_scorer(id="s", description="d", prepare_run=lambda run: 42).generate_score(
        lambda: 1
    )
    with pytest.raises(ScorerRunError, match="prepare_run must return a ScorerRun") as info:
        await scorer.run()
    assert info.value.failed_step == "prepare_run"


async def test_prepare_run_returning_an_invalid_dict_names_the_field() -> None:
    scorer = create_scorer(
        id="s", description="d", prepare_run=lambda run: {"request_context": "not a dict"}
    ).generate_score(lambda: 1)
    with pytest.raises(ScorerRunError, match="prepare_run returned an invalid run: request_context"):
        await scorer.run()


async def test_prepare_run_that_raises_is_a_run_error_with_chained_cause() -> None:
    boom = KeyError("missing")

    def prepare(run: Any) -> Any:
        raise boom

    scorer = create_scorer(id="s", description="d", prepare_run=prepare).generate_score(lambda: 1)
    with pytest.raises(ScorerRunError) as info:
        await scorer.run()
    err = info.value
    assert (err.failed_step, err.completed_steps, err.partial_result) == ("prepare_run", [], None)
    assert err.__cause__ is boom and str(err) == "Scorer Run Failed: 'missing'"


async def test_missing_generate_score_fails_before_prepare_run() -> None:
    prepared: list[Any] = []
    scorer = create_scorer(id="no-score", description="d", prepare_run=prepared.append).analyze(
        lambda: 1
    )
    with pytest.raises(ScorerRunError) as info:
        await scorer.run(output="x")
    assert str(info.value) == (
        "Scorer Run Failed: Cannot execute pipeline without generate_score() step "
        '(scorer "no-score", steps: analyze)'
    )
    assert isinstance(info.value.__cause__, ScorerDefinitionError)
    assert info.value.scorer_id == "no-score" and prepared == []


# -- score validation ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "shown"),
    [("0.5", "'0.5' (str)"), (True, "True (bool)"), (None, "None (NoneType)"), ([1], "[1] (list)")],
)
async def test_non_numeric_score_fails_naming_scorer_step_and_value(bad: Any, shown: str) -> None:
    scorer = create_scorer(id="picky", description="d").generate_score(lambda: bad)
    with pytest.raises(ScorerRunError) as info:
        await scorer.run()
    assert str(info.value) == (
        'Scorer Run Failed: Scorer "picky": generate_score must return a finite real number '
        f"(int or float), got {shown}"
    )
    assert info.value.failed_step == "generate_score"
    assert isinstance(info.value.__cause__, TypeError)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
async def test_non_finite_score_fails(bad: float) -> None:
    scorer = create_scorer(id="picky", description="d").generate_score(lambda: bad)
    with pytest.raises(ScorerRunError, match=f"generate_score must return a finite .* got {bad}"):
        await scorer.run()


async def test_int_score_is_accepted_as_float() -> None:
    result = await create_scorer(id="s", description="d").generate_score(lambda: 3).run()
    assert result.score == 3.0 and isinstance(result.score, float)


async def test_zero_score_is_a_score() -> None:
    result = await create_scorer(id="s", description="d").generate_score(lambda: 0).run()
    assert result.score == 0.0 and result.not_scorable is None


# -- not_scorable --------------------------------------------------------------------------


@pytest.mark.parametrize("step", ["preprocess", "analyze", "generate_score", "generate_reason"])
async def test_not_scorable_from_any_step_skips_the_rest(step: str) -> None:
    calls, make = recorder()
    steps = {
        "preprocess": make("preprocess", "p"),
        "analyze": make("analyze", "a"),
        "generate_score": make("generate_score", 0.5),
        "generate_reason": make("generate_reason", "r"),
    }

    def stop(**kw: Any) -> NotScorable:
        calls.append(step)
        return not_scorable("nothing to score")

    steps[step] = stop
    scorer = create_scorer(id="s", description="d")
    for name, fn in steps.items():
        scorer = getattr(scorer, name)(fn)
    result = await scorer.run(run_id="r1")
    order = ["preprocess", "analyze", "generate_score", "generate_reason"]
    assert calls == order[: order.index(step) + 1]
    assert result.not_scorable == NotScorable(step=step, reason="nothing to score")  # type: ignore[arg-type]
    assert result.score is None and result.reason is None and result.run_id == "r1"
    expected_pre = None if step == "preprocess" else "p"
    expected_analyze = None if step in ("preprocess", "analyze") else "a"
    assert (result.preprocess_step_result, result.analyze_step_result) == (
        expected_pre,
        expected_analyze,
    )


async def test_not_scorable_without_reason() -> None:
    result = await create_scorer(id="s", description="d").generate_score(not_scorable).run()
    assert result.not_scorable == NotScorable(step="generate_score")
    assert result.not_scorable.reason is None


# -- errors --------------------------------------------------------------------------------


async def test_failing_step_reports_step_completed_steps_and_partial_result() -> None:
    boom = ValueError("boom")
    attempts: list[int] = []

    def analyze(run: Any) -> Any:
        attempts.append(1)
        raise boom

    scorer = (
        create_scorer(id="fragile", description="d")
        .preprocess(lambda run: {"clean": run.output})
        .analyze(analyze)
        .generate_score(lambda: 1)
    )
    with pytest.raises(ScorerRunError) as info:
        await scorer.run(output="o", run_id="r")
    err = info.value
    assert str(err) == "Scorer Run Failed: boom"
    assert (err.scorer_id, err.failed_step, err.completed_steps) == (
        "fragile",
        "analyze",
        ["preprocess"],
    )
    assert err.__cause__ is boom and attempts == [1]
    partial = err.partial_result
    assert isinstance(partial, ScorerResult)
    assert (partial.preprocess_step_result, partial.analyze_step_result, partial.score) == (
        {"clean": "o"},
        None,
        None,
    )
    assert partial.run_id == "r"


async def test_failure_in_the_first_step_has_no_partial_result() -> None:
    scorer = create_scorer(id="s", description="d").generate_score(lambda: 1 / 0)
    with pytest.raises(ScorerRunError) as info:
        await scorer.run()
    err = info.value
    assert (err.failed_step, err.completed_steps, err.partial_result) == (
        "generate_score",
        [],
        None,
    )
    assert isinstance(err.__cause__, ZeroDivisionError)


async def test_failure_in_generate_reason_keeps_the_score_in_the_partial_result() -> None:
    scorer = (
        create_scorer(id="s", description="d")
        .generate_score(lambda: 0)
        .generate_reason(lambda: {"a": 1}["missing"])
    )
    with pytest.raises(ScorerRunError) as info:
        await scorer.run()
    err = info.value
    assert err.completed_steps == ["generate_score"]
    assert err.partial_result is not None and err.partial_result.score == 0.0


async def test_cause_without_message_uses_mastra_fallback_text() -> None:
    def fail() -> float:
        raise RuntimeError()

    with pytest.raises(ScorerRunError, match="^Scorer Run Failed: Scorer workflow failed$"):
        await create_scorer(id="s", description="d").generate_score(fail).run()


async def test_cancellation_is_not_wrapped() -> None:
    async def slow() -> float:
        await asyncio.Event().wait()
        return 1.0

    task = asyncio.create_task(create_scorer(id="s", description="d").generate_score(slow).run())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_concurrent_runs_of_one_scorer_are_independent() -> None:
    async def analyze(run: ScorerRun[Any, Any]) -> int:
        await asyncio.sleep(0)
        return int(run.input)

    scorer = (
        create_scorer(id="s", description="d")
        .analyze(analyze)
        .generate_score(lambda results: results.analyze_step_result * 2)
        .generate_reason(lambda run, score: f"{run.input}->{score:g}")
    )
    results = await asyncio.gather(*(scorer.run(input=str(i), run_id=f"r{i}") for i in range(50)))
    assert [r.score for r in results] == [float(i * 2) for i in range(50)]
    assert [r.reason for r in results] == [f"{i}->{i * 2}" for i in range(50)]
    assert [r.run_id for r in results] == [f"r{i}" for i in range(50)]


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_sys_exit_in_a_step_fails_the_run_not_the_process(asynchronous: bool) -> None:
    """asyncio lets SystemExit out of the event loop: a scorer calling sys.exit() would stop
    the daemon. It fails its step like any other error instead."""
    import sys

    def leave(run: Any) -> float:
        sys.exit(3)

    async def leave_async(run: Any) -> float:
        sys.exit(3)

    scorer = create_scorer(id="quits", description="calls sys.exit").generate_score(
        leave_async if asynchronous else leave)
    with pytest.raises(ScorerRunError) as caught:
        await scorer.run({"input": "x", "output": "y"})
    assert caught.value.failed_step == "generate_score"
    assert "sys.exit(3)" in str(caught.value.__cause__)
