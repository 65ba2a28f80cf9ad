"""Judge replies already paid for are replayed, not asked again (`remember_judge_replies`).

The daemon runs a handed-back or crashed job's scorer again from its first step; with the
job's memo, a step whose judge call finished gets its reply back and only unfinished calls
reach the model. Real HTTP against the loopback test server, on both transports.
"""

from __future__ import annotations

from typing import Any

from judge_support import Reply

from scorers import Judge, create_scorer
from scorers._reply_memo import DictReplyMemo, remember_judge_replies

VERDICT = {"type": "object", "properties": {"relevant": {"type": "boolean"}}, "required": ["relevant"]}


def two_step(settings: dict[str, Any]) -> Any:
    judge = Judge(model="openai/gpt-4o-mini", instructions="Judge.", model_settings=settings)
    return (
        create_scorer(id="two-step", description="d", judge=judge)
        .analyze(description="relevance", output_schema=VERDICT, create_prompt=lambda run: "Is it relevant?")
        .generate_score(description="score", create_prompt=lambda run, results: "Score it")
    )


async def test_a_replay_with_every_reply_kept_sends_nothing(server: Any, settings: dict[str, Any],
                                                            transport: str) -> None:
    server.script(Reply.json({"relevant": True}), Reply.json({"score": 0.75}))
    memo = DictReplyMemo()
    with remember_judge_replies(memo):
        first = await two_step(settings).run(output="a")
    assert len(server.requests) == 2 and len(memo.replies) == 2
    with remember_judge_replies(memo):
        again = await two_step(settings).run(output="a")
    assert len(server.requests) == 2  # nothing sent the second time
    assert (again.score, again.analyze_step_result) == (first.score, first.analyze_step_result) == (
        0.75, {"relevant": True})
    assert [e.model_call_count for step in again.judge.values() for e in step.executions] == [0, 0]
    assert again.judge["analyze"].executions[0].usage == first.judge["analyze"].executions[0].usage


async def test_only_the_unfinished_call_is_asked_again(server: Any, settings: dict[str, Any],
                                                       transport: str) -> None:
    """A job cut off during its second judge call: the first call's reply was kept."""
    server.script(Reply.json({"relevant": True}), Reply.json({"score": 0.25}))
    memo = DictReplyMemo()
    with remember_judge_replies(memo):
        await two_step(settings).run(output="a")
    (score_key,) = [k for k in memo.replies if memo.replies[k]["text"] == '{"score": 0.25}']
    del memo.replies[score_key]  # as if the run had stopped before that reply came
    server.script(Reply.json({"score": 0.5}))
    with remember_judge_replies(memo):
        result = await two_step(settings).run(output="a")
    assert len(server.requests) == 3
    assert "Score it" in server.requests[-1].message_text("user")
    assert result.score == 0.5 and result.analyze_step_result == {"relevant": True}


async def test_the_same_request_twice_in_a_run_gets_two_answers_and_replays_both(
    server: Any, settings: dict[str, Any], transport: str,
) -> None:
    judge = Judge(model="openai/gpt-4o-mini", instructions="Judge.", model_settings=settings)
    same = {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]}
    asks_twice = (
        create_scorer(id="twice", description="d", judge=judge)
        .analyze(description="one", output_schema=same, create_prompt=lambda run: "Rate it")
        .generate_score(lambda results: results.analyze_step_result["score"])
        .generate_reason(description="why", create_prompt=lambda run: "Rate it")
    )
    server.script(Reply.json({"score": 0.2}), Reply.text("second opinion"))
    memo = DictReplyMemo()
    with remember_judge_replies(memo):
        first = await asks_twice.run(output="a")
    with remember_judge_replies(memo):
        again = await asks_twice.run(output="a")
    assert len(server.requests) == 2 and len(memo.replies) == 2
    assert (first.score, first.reason) == (again.score, again.reason) == (0.2, "second opinion")


async def test_without_a_memo_every_run_asks(server: Any, settings: dict[str, Any]) -> None:
    server.script(Reply.json({"relevant": True}), Reply.json({"score": 0.75}),
                  Reply.json({"relevant": False}), Reply.json({"score": 0.1}))
    await two_step(settings).run(output="a")
    second = await two_step(settings).run(output="a")
    assert len(server.requests) == 4 and second.score == 0.1
