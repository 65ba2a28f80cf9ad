"""Conversation completeness, user frustration, knowledge retention and role adherence
against the fake judge server (SPEC §7)."""

from __future__ import annotations

from typing import Any

import pytest
from builtin_support import by_prefix, prompts

from scorers import ConversationRun, Judge, JudgeOutputError, ScorerRunError
from scorers.builtin import (
    conversation_completeness,
    knowledge_retention,
    role_adherence,
    user_frustration,
)
from scorers.utils import make_agent_run, make_message

TRANSCRIPT = ("user: I am vegan. Suggest a dinner.\nassistant: Try a lentil curry.\n"
              "user: And a dessert?\nassistant: A beef jerky platter.")


def turns(system: str | None = "You are Chef Lu, a cooking assistant. Only talk about food.") -> list[Any]:
    return [
        make_agent_run("I am vegan. Suggest a dinner.", "Try a lentil curry.",
                       system_messages=[system] if system else [], trace_id="1" * 32),
        make_agent_run("And a dessert?", "A beef jerky platter.", trace_id="2" * 32),
    ]


def verdicts(*values: str) -> dict[str, Any]:
    return {"verdicts": [{"verdict": v, "reason": f"r{i}"} for i, v in enumerate(values)]}


async def test_conversation_completeness_share_of_answered_requests(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({
        "Extract the requests": {"statements": ["a vegan dinner", "a dessert", "a wine"]},
        "Judge whether the assistant answered": verdicts("yes", "no", "unsure"),
        "Explain the conversation completeness": "One of three requests was answered.",
    })
    result = await conversation_completeness(judge, scale=3).run(turns())
    assert (result.score, result.reason) == (1.0, "One of three requests was answered.")  # 1 / 3 * 3
    sent = prompts(server)
    assert sent[0].endswith("User messages:\n1. I am vegan. Suggest a dinner.\n2. And a dessert?")
    assert sent[1].endswith("Requests:\n1. a vegan dinner\n2. a dessert\n3. a wine\n\nConversation:\n" + TRANSCRIPT)
    assert "- a dessert: no (r1)" in sent[2]


async def test_conversation_completeness_missing_verdicts_and_nothing_to_score(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({"Extract the requests": {"statements": ["a", "b"]},
                                  "Judge whether the assistant answered": verdicts("yes"),
                                  "Explain": "Half."})
    assert (await conversation_completeness(judge).run(turns())).score == 0.5
    server.responder = by_prefix({"Extract the requests": {"statements": []}})
    result = await conversation_completeness(judge).run(turns())
    assert result.not_scorable is not None and result.not_scorable.reason == "the user made no request"
    count = len(server.requests)
    silent = await conversation_completeness(judge).run([make_agent_run("Hello?", [])])
    assert silent.not_scorable is not None and silent.not_scorable.reason == "the conversation has no assistant message"
    assert len(server.requests) == count  # no judge call for it


@pytest.mark.parametrize(("level", "score"), [("none", 1.0), ("Resolved", 0.5), ("UNRESOLVED ", 0.0)])
async def test_user_frustration_levels(server: Any, judge: Judge, level: str, score: float) -> None:
    server.responder = by_prefix({"Judge the user's frustration": {"frustration": level, "reason": "why"}})
    result = await user_frustration(judge).run(ConversationRun.from_turns(turns(), session_id="s1"))
    assert (result.score, result.reason) == (score, "why")
    (sent,) = prompts(server)
    assert sent.endswith("Conversation:\n" + TRANSCRIPT)


async def test_knowledge_retention_counts_forgetful_assistant_messages(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({"Judge each assistant message for knowledge retention":
                                  verdicts("no", "yes")})
    result = await knowledge_retention(judge, scale=10).run(turns())
    assert (result.score, result.reason) == (5.0, "Forgot or contradicted what the user said: assistant #2 (r1)")
    (sent,) = prompts(server)
    assert "assistant #1: Try a lentil curry.\nuser: And a dessert?\nassistant #2: A beef jerky platter." in sent


async def test_knowledge_retention_missing_and_extra_verdicts(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({"Judge each assistant message": verdicts("no")})
    result = await knowledge_retention(judge).run(turns())
    assert (result.score, result.reason) == (1.0, "No assistant message forgot or contradicted what the user said.")
    server.responder = by_prefix({"Judge each assistant message": verdicts("yes", "yes", "yes")})
    assert (await knowledge_retention(judge).run(turns())).score == 0.0


async def test_role_adherence_reads_the_system_prompt_or_the_given_role(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({"Judge whether each assistant message keeps": verdicts("yes", "no")})
    result = await role_adherence(judge).run(turns())
    assert (result.score, result.reason) == (0.5, "Broke the role: assistant #2 (r1)")
    assert "Role:\nYou are Chef Lu, a cooking assistant. Only talk about food.\n\nConversation:\n" in prompts(server)[0]
    server.responder = by_prefix({"Judge whether each assistant message keeps": verdicts("yes", "unsure")})
    given = await role_adherence(judge, role="A pirate").run(turns(system=None))
    assert (given.score, given.reason) == (1.0, "Every assistant message kept the role.")
    assert "Role:\nA pirate\n\n" in prompts(server)[1]


async def test_role_adherence_without_a_role_is_not_scorable(server: Any, judge: Judge) -> None:
    result = await role_adherence(judge).run(turns(system=None))
    assert result.not_scorable is not None and result.not_scorable.reason.startswith("no role")
    assert server.requests == []


@pytest.mark.parametrize(("factory", "step"), [
    (conversation_completeness, "preprocess"), (user_frustration, "analyze"),
    (knowledge_retention, "analyze"), (role_adherence, "analyze"),
])
async def test_a_judge_that_answers_junk_fails_the_step(server: Any, judge: Judge, factory: Any, step: str) -> None:
    server.responder = lambda body: by_prefix({"": "I think it went fine!"})(body)
    with pytest.raises(ScorerRunError) as caught:
        await factory(judge).run(turns())
    assert caught.value.failed_step == step
    assert isinstance(caught.value.__cause__, JudgeOutputError)
    assert len(server.requests) == 2  # the reply is retried once with the schema injected, as for every judge


async def test_a_judge_level_out_of_range_fails(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({"Judge the user's frustration": {"frustration": "furious", "reason": ""}})
    with pytest.raises(ScorerRunError) as caught:
        await user_frustration(judge).run(turns())
    assert caught.value.failed_step == "analyze"


async def test_conversation_scorers_refuse_a_single_run(judge: Judge) -> None:
    for factory in (conversation_completeness, user_frustration, knowledge_retention, role_adherence):
        with pytest.raises(ScorerRunError, match="is a conversation scorer"):
            await factory(judge).run(make_agent_run("Hi", [make_message("Hello", role="assistant")]))
