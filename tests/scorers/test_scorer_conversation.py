"""Conversation scorers (SPEC §7): `ConversationRun` from a session's turns, and
``create_scorer(type="conversation")`` with function steps, judge prompt steps, processors
and ``prepare_run`` / `filter_run`."""

from __future__ import annotations

from typing import Any

import pytest
from llm_server import Reply
from pydantic import BaseModel, ValidationError

from scorers import (
    ConversationRun,
    Judge,
    PIIRedactor,
    ScorerDefinitionError,
    ScorerInputError,
    ScorerRun,
    ScorerRunError,
    StreamErrorRetryProcessor,
    create_scorer,
    filter_run,
)
from scorers.utils import (
    extract_tool_calls,
    get_assistant_message,
    get_combined_system_prompt,
    get_user_message,
    make_agent_run,
    make_message,
    make_tool_call,
)

T1, T2, T3 = "1" * 32, "2" * 32, "3" * 32


def assistant(text: str, **kw: Any) -> Any:
    return make_message(text, role="assistant", **kw)


def mastra_turns() -> list[ScorerRun[Any, Any]]:
    """Turns that repeat nothing: each input holds only the new user message (history in memory)."""
    return [
        make_agent_run("My order is 42.", "Noted, order 42.", system_messages=["You are Ada, a support agent."],
                       trace_id=T1, span_id="a" * 16),
        make_agent_run("Where is it?", [
            assistant("", tool_calls=[make_tool_call("track", {"order": 42}, "shipped", id="c1")]),
            {"role": "tool", "tool_call_id": "c1", "name": "track", "content": "shipped"},
            assistant("It shipped today.")],
            remembered_messages=["My order is 42.", assistant("Noted, order 42.")], trace_id=T2, span_id="b" * 16),
    ]


def chat_turns() -> list[ScorerRun[Any, Any]]:
    """Turns that repeat the history: each input is the whole chat so far (chat-completions style)."""
    return [
        make_agent_run([{"role": "system", "content": "Be brief."}, "Hi, I am Bo."], "Hello Bo.", trace_id=T1),
        make_agent_run([{"role": "system", "content": "Be brief."}, "Hi, I am Bo.", assistant("Hello Bo."),
                        "What is my name?"], "Bo.", trace_id=T2),
    ]


def entries(convo: ConversationRun) -> list[tuple[str, str, str | None]]:
    return [(e["role"], e["content"], e["trace_id"]) for e in convo.conversation]


def test_turns_that_repeat_nothing_contribute_every_user_message() -> None:
    convo = ConversationRun.from_turns(mastra_turns(), session_id="s1", service="shop")
    assert [m.content for m in convo.input.input_messages] == ["My order is 42.", "Where is it?"]
    assert convo.input.remembered_messages == []
    assert [m.role for m in convo.output] == ["assistant", "assistant", "tool", "assistant"]
    assert entries(convo) == [
        ("user", "My order is 42.", T1), ("assistant", "Noted, order 42.", T1),
        ("user", "Where is it?", T2), ("tool", "track: shipped", T2), ("assistant", "It shipped today.", T2),
    ]  # the result given on the call and in the tool message is one entry
    assert (convo.session_id, convo.service, convo.revision, convo.partial) == ("s1", "shop", 1, False)
    assert (convo.trace_id, convo.span_id) == (T2, "b" * 16)  # the last turn's


def test_turns_that_repeat_the_history_contribute_only_new_user_messages() -> None:
    convo = ConversationRun.from_turns(chat_turns())
    assert [m.content for m in convo.input.input_messages] == ["Hi, I am Bo.", "What is my name?"]
    assert [m.content for m in convo.input.system_messages] == ["Be brief."]  # the first turn's
    assert entries(convo) == [("user", "Hi, I am Bo.", T1), ("assistant", "Hello Bo.", T1),
                              ("user", "What is my name?", T2), ("assistant", "Bo.", T2)]


def test_a_windowed_history_and_a_repeated_question_are_told_apart() -> None:
    turns = [make_agent_run("a", "A"), make_agent_run("b", "B"),
             make_agent_run([assistant("B"), "a"], "A again")]  # memory window: the last answer, then a new "a"
    convo = ConversationRun.from_turns(turns)
    assert [m.content for m in convo.input.input_messages] == ["a", "b", "a"]


def test_the_helpers_read_a_conversation_as_they_read_a_run() -> None:
    convo = ConversationRun.from_turns(mastra_turns())
    assert get_user_message(convo) == "My order is 42."
    assert get_assistant_message(convo) == "It shipped today."
    assert get_combined_system_prompt(convo) == "You are Ada, a support agent."
    assert extract_tool_calls(convo).tools == ["track"]


def test_turns_are_ordered_by_start_time_when_every_turn_has_one() -> None:
    late = make_agent_run("second", "2", start_ns=2_000, trace_id=T2)
    early = make_agent_run("first", "1", start_ns=1_000, trace_id=T1)
    assert [t.trace_id for t in ConversationRun.from_turns([late, early]).turns] == [T1, T2]
    assert get_user_message(ConversationRun.from_turns([late, early])) == "first"
    unknown = make_agent_run("third", "3", trace_id=T3)
    assert [t.trace_id for t in ConversationRun.from_turns([late, unknown, early]).turns] == [T2, T3, T1]


def test_turns_may_be_dicts_and_are_made_agent_typed() -> None:
    convo = ConversationRun.from_turns([{"input": "Hi", "output": "Hello!", "traceId": T1,
                                         "requestContext": {"service": "bot"}}])
    assert entries(convo) == [("user", "Hi", T1), ("assistant", "Hello!", T1)]
    assert convo.service == "bot" and convo.turns[0].output[0].role == "assistant"
    assert ConversationRun(turns=[{"input": "Hi", "output": "Hello!"}]).conversation == [
        {"role": "user", "content": "Hi", "trace_id": None}, {"role": "assistant", "content": "Hello!", "trace_id": None}]


@pytest.mark.parametrize(("turn", "message"), [
    ({"role": "user", "content": "Hi"}, "turn 0 is not a run"),
    ({"input": {"inputMessages": [{"role": "robot"}]}}, "turn 0 is not an agent run"),
    (ConversationRun(), "turn 0 is a ConversationRun"),
    (ScorerRun(input="x", start_ns="soon"), "start_ns must be an int"),
])
def test_a_turn_that_is_not_an_agent_run_is_refused(turn: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ConversationRun.from_turns([turn])


def test_the_conversation_type() -> None:
    scorer = create_scorer(id="c", description="d", type="conversation")
    assert scorer.type == "conversation"
    with pytest.raises(ScorerDefinitionError, match='type must be "agent", "conversation" or None'):
        create_scorer(id="c", description="d", type="session")  # type: ignore[call-overload]
    with pytest.raises(ScorerDefinitionError, match='give either type="conversation" or input_type'):
        create_scorer(id="c", description="d", type="conversation", input_type=dict)  # type: ignore[call-overload]


async def test_a_function_step_reads_the_turns_the_transcript_and_the_session() -> None:
    scorer = (
        create_scorer(id="turns", description="How many turns", type="conversation")
        .analyze(lambda run: {"users": [e["content"] for e in run.conversation if e["role"] == "user"]})
        .generate_score(lambda run: float(len(run.turns)))
        .generate_reason(lambda run, results: f"{run.session_id} r{run.revision}: {results.analyze_step_result['users']}")
    )
    result = await scorer.run(mastra_turns(), session_id="s9", revision=2, run_id="conv-1")
    assert (result.score, result.run_id, result.trace_id) == (2.0, "conv-1", T2)
    assert result.reason == "s9 r2: ['My order is 42.', 'Where is it?']"
    assert [m.content for m in result.input.input_messages] == ["My order is 42.", "Where is it?"]
    same = scorer.run_sync(ConversationRun.from_turns(mastra_turns(), session_id="s9", revision=2))
    assert same.score == 2.0


async def test_a_single_run_and_a_conversation_go_to_their_own_kind_of_scorer() -> None:
    conversation = create_scorer(id="conv", description="d", type="conversation").generate_score(lambda: 1)
    with pytest.raises(ScorerRunError) as caught:
        await conversation.run(make_agent_run("Hi", "Hello"))
    cause = caught.value.__cause__
    assert isinstance(cause, ScorerInputError) and cause.field == "run"
    assert str(cause) == ('Scorer "conv" is a conversation scorer: run it on a ConversationRun or a list '
                          "of turns, not a single ScorerRun")
    with pytest.raises(ScorerRunError, match="is a conversation scorer"):
        await conversation.run(input="Hi", output="Hello")
    with pytest.raises(TypeError, match="takes its turns as input; give no output"):
        await conversation.run(mastra_turns(), output="x")
    for kind in ("agent", None):
        single = create_scorer(id="one", description="d", type=kind).generate_score(lambda: 1)  # type: ignore[call-overload]
        with pytest.raises(ScorerRunError, match='a ConversationRun needs a scorer with type="conversation"') as caught:
            await single.run(ConversationRun.from_turns(mastra_turns()))
        assert isinstance(caught.value.__cause__, ScorerInputError) and caught.value.failed_step is None
    assert (await create_scorer(id="l", description="d").generate_score(lambda run: len(run.input)).run(
        input=["a list", "is an input"])).score == 2.0  # a list is turns only for conversation scorers


async def test_filter_run_trims_a_conversation_and_keeps_its_turns() -> None:
    seen: list[ConversationRun] = []
    scorer = create_scorer(
        id="trim", description="d", type="conversation",
        prepare_run=filter_run(max_output_messages=1, drop_request_context=True),
    ).generate_score(lambda run: seen.append(run) or float(len(run.output)))
    result = await scorer.run(mastra_turns(), request_context={"user": "u1"}, session_id="s1")
    (run,) = seen
    assert isinstance(run, ConversationRun) and result.score == 1.0
    assert [m.content for m in run.output] == ["It shipped today."] and run.request_context == {}
    assert (len(run.turns), len(run.conversation), run.session_id) == (2, 5, "s1")


async def test_prepare_run_may_return_a_dict_or_must_keep_the_conversation() -> None:
    seen: list[Any] = []
    keeps = create_scorer(id="dict", description="d", type="conversation",
                          prepare_run=lambda run: {"input": run.input, "output": [], "ground_truth": "g"},
                          ).generate_score(lambda run: seen.append(run) or 1.0)
    await keeps.run(mastra_turns(), session_id="s1")
    (run,) = seen
    assert isinstance(run, ConversationRun) and (run.session_id, len(run.turns), run.ground_truth) == ("s1", 2, "g")
    assert list(run.output) == [] and run.trace_id == T2
    drops = create_scorer(id="plain", description="d", type="conversation",
                          prepare_run=lambda run: ScorerRun(input="x")).generate_score(lambda: 1.0)
    with pytest.raises(ScorerRunError) as caught:
        await drops.run(mastra_turns())
    assert caught.value.failed_step == "prepare_run" and isinstance(caught.value.__cause__, ScorerInputError)


class Goal(BaseModel):
    met: bool


def judged(server: Any, **judge: Any) -> Any:
    return (
        create_scorer(id="goal", description="Was the user's goal met?", type="conversation",
                      judge=Judge(model="openai/gpt-4o-mini", instructions="You judge support chats.",
                                  model_settings={"api_base": server.url + "/v1", "api_key": "k"}, **judge))
        .analyze(description="Judge the goal", output_schema=Goal, create_prompt=lambda run: "Was the goal met?\n" + "\n".join(
            f"{e['role']}: {e['content']}" for e in run.conversation))
        .generate_score(lambda results: 1.0 if results.analyze_step_result.met else 0.0)
    )  # fmt: skip


async def test_a_judge_prompt_step_gets_the_transcript(server: Any) -> None:
    server.script(Reply.json({"met": True}))
    result = await judged(server).run(mastra_turns())
    assert result.score == 1.0 and result.analyze_step_result == Goal(met=True)
    (request,) = server.requests
    assert request.message_text("user") == (
        "Was the goal met?\nuser: My order is 42.\nassistant: Noted, order 42.\nuser: Where is it?\n"
        "tool: track: shipped\nassistant: It shipped today.")
    assert request.message_text("system").startswith("You judge support chats.")
    assert result.judge["analyze"].executions[0].status == "success"


async def test_processors_work_on_a_conversation_judge(server: Any) -> None:
    server.script(Reply.error(503), Reply.json({"met": False}))
    scorer = judged(server, input_processors=[PIIRedactor()],
                    error_processors=[StreamErrorRetryProcessor(max_retries=1)])
    turns = [make_agent_run("Mail me at jane.doe@example.com", "Will do.")]
    result = await scorer.run(turns)
    assert result.score == 0.0
    assert [r.message_text("user") for r in server.requests] == [
        "Was the goal met?\nuser: Mail me at [EMAIL]\nassistant: Will do."] * 2  # redacted, retried once
    assert result.analyze_prompt is not None and "jane.doe@example.com" in result.analyze_prompt
    (execution,) = result.judge["analyze"].executions
    assert (execution.model_call_count, execution.request_count) == (1, 2)
