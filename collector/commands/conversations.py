"""Conversations in saved files (SPEC §7, offline): ``tracescore score`` groups the runs it
found into sessions for conversation scorers.

A file set is complete: a session is every run of one service with one session key, scored
at once (no idle wait) as revision 1. Each session becomes a *unit* scored like a run: an
`AgentRun` that is its last turn (where its score lands) with the conversation's input and
output, the `ConversationRun` a conversation scorer is given, and the conversation job's
`RunRecord` that ``--export`` turns into the daemon's own record (same ids).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from adapters import AgentRun
from collector.assemble.decide import run_record
from collector.commands.sessions_view import group_sessions
from collector.common.session_types import DueSession, conversation_of, session_scope
from collector.common.types import RunRecord
from collector.work.conversation import conversation_run
from scorers import ConversationRun

__all__ = ["SessionUnit", "is_conversation_scorer", "session_units"]


def is_conversation_scorer(scorer: Any) -> bool:
    """Whether ``scorer`` scores conversations (``type="conversation"``) rather than runs."""
    return getattr(scorer, "type", None) == "conversation"


@dataclass(frozen=True)
class SessionUnit:
    """One session of the files, as ``score`` handles it.

    Attributes:
        unit: the session's last turn with the conversation's input and output (rows, table).
        conversation: what a conversation scorer is given.
        record: the conversation job's record (``--export``).
    """

    unit: AgentRun
    conversation: ConversationRun
    record: RunRecord


def session_units(runs: Sequence[AgentRun], span_attributes: Mapping[tuple[str, str], Mapping[str, Any]]
                  ) -> list[SessionUnit]:
    """The sessions the runs make (`collector.commands.sessions_view.group_sessions`), each as
    a `SessionUnit` (``span_attributes``: each run span's attributes, by trace and span id).

    Example:
        >>> from scorers._agent_types import ScorerRunInputForAgent, ScorerRunOutputForAgent
        >>> def turn(span, start, text):
        ...     return AgentRun("a" * 32, span, "agent", "bot", "genai", start, start + 1,
        ...                     ScorerRunInputForAgent.model_validate({"input_messages": [{"role": "user", "content": text}]}),
        ...                     ScorerRunOutputForAgent([]), session_id="c1")
        >>> (u,) = session_units([turn("2" * 16, 20, "second"), turn("1" * 16, 10, "first")], {})
        >>> ([m.content for m in u.unit.input.input_messages], u.unit.span_id, u.record.conversation["scope"])
        (['first', 'second'], '2222222222222222', 'bot/c1')
    """
    units = []
    for session in group_sessions(runs):
        records = tuple(run_record(t, span_attributes.get((t.trace_id, t.span_id), {})) for t in session.turns)
        due = DueSession(session_scope(session.service, session.session_id), session.session_id, session.service,
                         records, revision=1, partial=False, reason="files")
        record = replace(records[-1], conversation=conversation_of(due))
        convo = conversation_run(record)
        unit = replace(session.turns[-1], input=convo.input, output=convo.output)
        units.append(SessionUnit(unit, convo, record))
    return units
