"""A conversation job's run (SPEC §7): the session its `RunRecord` carries, as the
`ConversationRun` a conversation scorer is given, and as the `SessionScore` its score record keeps.

A conversation job's record is the session's last turn (its score lands there) with the
session in ``RunRecord.conversation`` (`collector.common.session_types.conversation_of`): its scope,
key, service, revision, partial flag and every turn.
"""

from __future__ import annotations

import uuid
from typing import Any

from collector.common.record_json import known_fields
from collector.common.session_types import SessionScore
from collector.common.types import RunRecord
from scorers import ConversationRun, ScorerRun
from scorers._agent_types import ScorerRunInputForAgent, ScorerRunOutputForAgent

__all__ = ["conversation_run", "scored_what", "session_run_id", "session_score", "turns_of"]


def scored_what(trace_id: str, span_id: str, session_id: str | None = None, revision: int | None = None) -> str:
    """What a ``-v`` line says was scored: the run's trace and span, or, for a conversation score,
    the session by its key and revision, with its last turn (where the score lands).

    Example:
        >>> scored_what("ab" * 16, "cd" * 8)
        'trace abababababababababababababababab span cdcdcdcdcdcdcdcd'
        >>> scored_what("ab" * 16, "cd" * 8, "chat-7", 2)
        "session 'chat-7' (revision 2; last turn: trace abababababababababababababababab span cdcdcdcdcdcdcdcd)"
    """
    where = f"trace {trace_id} span {span_id}"
    if session_id is None:
        return where
    return f"session {session_id!r} ({f'revision {revision}; ' if revision else ''}last turn: {where})"


def turns_of(run: RunRecord) -> list[RunRecord]:
    """The turns of a conversation job's record, in the order the session holds them."""
    conversation = run.conversation or {}
    return [RunRecord(**known_fields(RunRecord, turn)) for turn in conversation.get("turns", [])]


def session_run_id(scope: str, revision: int, first_trace_id: str = "") -> str:
    """The run id of a session's conversation run at one revision (and first turn: a key reused
    for a new conversation names another): the same for every scorer, replica and backfill of it.

    Example:
        >>> session_run_id("bot/c1", 1) == session_run_id("bot/c1", 1), session_run_id("bot/c1", 1) == session_run_id("bot/c1", 2)
        (True, False)
    """
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"tracescore:session/{scope}#{revision}/{first_trace_id}"))


def conversation_run(run: RunRecord) -> ConversationRun:
    """The `ConversationRun` of a conversation job's record: its turns as agent runs (with their
    ids, request context and start times), the session's key, service, revision and partial flag;
    its trace and span are the last turn's.

    Example:
        >>> from collector.common.session_types import DueSession, conversation_of
        >>> first = RunRecord("a" * 32, "1" * 16, start_ns=1, service="bot",
        ...                   input={"input_messages": [{"role": "user", "content": "I am Ann."}]},
        ...                   output=[{"role": "assistant", "content": "Hi Ann."}])
        >>> second = RunRecord("b" * 32, "2" * 16, start_ns=2, service="bot",
        ...                    input={"input_messages": [{"role": "user", "content": "Who am I?"}]},
        ...                    output=[{"role": "assistant", "content": "Ann."}])
        >>> job_run = RunRecord("b" * 32, "2" * 16, conversation=conversation_of(
        ...     DueSession("bot/c1", "c1", "bot", (first, second), revision=2)))
        >>> convo = conversation_run(job_run)
        >>> [(e["role"], e["content"]) for e in convo.conversation]
        [('user', 'I am Ann.'), ('assistant', 'Hi Ann.'), ('user', 'Who am I?'), ('assistant', 'Ann.')]
        >>> (convo.session_id, convo.service, convo.revision, convo.partial, convo.span_id)
        ('c1', 'bot', 2, False, '2222222222222222')
    """
    conversation = run.conversation or {}
    turns: list[ScorerRun[Any, Any]] = [
        ScorerRun.model_validate({
            "input": ScorerRunInputForAgent.model_validate(turn.input),
            "output": ScorerRunOutputForAgent.model_validate(turn.output),
            "run_id": turn.run_id, "request_context": dict(turn.request_context),
            "trace_id": turn.trace_id, "span_id": turn.span_id, "start_ns": turn.start_ns})
        for turn in turns_of(run)
    ]
    scope, revision = str(conversation.get("scope", "")), int(conversation.get("revision", 1))
    return ConversationRun.from_turns(
        turns, session_id=conversation.get("session_id"), service=conversation.get("service"),
        revision=revision, partial=bool(conversation.get("partial", False)),
        run_id=session_run_id(scope, revision, str(conversation.get("first_trace_id", ""))),
        trace_id=run.trace_id, span_id=run.span_id,
        request_context=dict(run.request_context),
    )


def session_score(run: RunRecord) -> dict[str, Any] | None:
    """What a score of this job's record says about its session (``ScoreRecord.session``), or
    None for a run's job.

    Example:
        >>> from collector.common.session_types import DueSession, conversation_of
        >>> turns = (RunRecord("a" * 32, "1" * 16, start_ns=5), RunRecord("b" * 32, "2" * 16, start_ns=9))
        >>> job_run = RunRecord("b" * 32, "2" * 16, conversation=conversation_of(DueSession("bot/c1", "c1", "bot", turns)))
        >>> s = session_score(job_run)
        >>> (s["turns"], s["first_trace_id"], s["first_start_ns"], s["trace_ids"][-1] == "b" * 32, session_score(turns[0]))
        (2, 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 5, True, None)
    """
    conversation = run.conversation
    if conversation is None:
        return None
    turns = conversation.get("turns", [])
    first = turns[0] if turns else {}
    return SessionScore(
        scope=str(conversation.get("scope", "")), session_id=str(conversation.get("session_id", "")),
        turns=len(turns), revision=int(conversation.get("revision", 1)),
        partial=bool(conversation.get("partial", False)),
        first_trace_id=str(first.get("trace_id", "")), first_span_id=str(first.get("span_id", "")),
        first_start_ns=int(first.get("start_ns", 0) or 0),
        trace_ids=[str(t.get("trace_id", "")) for t in turns],
    ).to_dict()
