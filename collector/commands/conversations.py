"""Conversations in saved files (SPEC §7, offline): ``tracescore score`` groups the runs it
found into sessions for conversation scorers.

A file set is complete: a session is every run of one service with one session key, scored
at once (no idle wait). Its revision is the daemon's: the traces read hold the evaluation
spans of its earlier scores (`collector.commands.scored_before`), so the same turns are the
revision already scored, more turns the next one, and a first score is revision 1; a session
of fewer turns than were scored (a window that cut it), or than ``[sessions] min_turns``, is
not scored. Each session scored becomes a *unit* scored like a run: an `AgentRun` that is its
last turn (where its score lands) with the conversation's input and output, the
`ConversationRun` a conversation scorer is given, and the conversation job's `RunRecord` that
``--export`` turns into the daemon's own record (same ids).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from adapters import AgentRun
from collector.assemble.decide import run_record
from collector.commands.scored_before import (
    ScoredBefore,
    ScorerKey,
    restore_services,
    session_revision,
)
from collector.commands.sessions_view import group_sessions
from collector.common.session_types import DueSession, conversation_of, session_scope
from collector.common.types import RunRecord
from collector.work.conversation import conversation_run
from scorers import ConversationRun

__all__ = ["SessionUnit", "Sessions", "file_sessions", "is_conversation_scorer", "session_units"]


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
        scored_before: the scorers (id, version) whose score of this revision is in the traces read.
    """

    unit: AgentRun
    conversation: ConversationRun
    record: RunRecord
    scored_before: frozenset[ScorerKey] = frozenset()


@dataclass
class Sessions:
    """The sessions the runs make: the ones to score, and how many are not scored and why.

    Attributes:
        units: the sessions to score.
        short: sessions of fewer turns than ``[sessions] min_turns``.
        behind: sessions scored before with more turns than the runs read hold.
    """

    units: list[SessionUnit] = field(default_factory=list)
    short: int = 0
    behind: int = 0

    def notes(self) -> list[str]:
        """What to tell about the sessions not scored (empty: none).

        Example:
            >>> Sessions(short=2, behind=1).notes()[0]
            '2 session(s) of fewer turns than [sessions] min_turns: not scored'
        """
        notes = []
        if self.short:
            notes.append(f"{self.short} session(s) of fewer turns than [sessions] min_turns: not scored")
        if self.behind:
            notes.append(f"{self.behind} session(s) were scored before with more turns than the traces read hold: "
                         "not scored again (read a window that holds all their turns)")
        return notes


def session_units(runs: Sequence[AgentRun], span_attributes: Mapping[tuple[str, str], Mapping[str, Any]],
                  seen: ScoredBefore | None = None, min_turns: int = 1) -> Sessions:
    """The sessions the runs make (`collector.commands.sessions_view.group_sessions`), each of at
    least ``min_turns`` turns as a `SessionUnit` at the revision its earlier scores in ``seen``
    give (`collector.commands.scored_before.session_revision`); a turn read without a service
    takes its session's from ``seen`` first (`restore_services`), so the session is the one
    the daemon scored. ``span_attributes``: each run span's attributes, by trace and span id.

    Example:
        >>> from scorers._agent_types import ScorerRunInputForAgent, ScorerRunOutputForAgent
        >>> def turn(span, start, text, session="c1"):
        ...     return AgentRun("a" * 32, span, "agent", "bot", "genai", start, start + 1,
        ...                     ScorerRunInputForAgent.model_validate({"input_messages": [{"role": "user", "content": text}]}),
        ...                     ScorerRunOutputForAgent([]), session_id=session)
        >>> found = session_units([turn("2" * 16, 20, "second"), turn("1" * 16, 10, "first"),
        ...                        turn("3" * 16, 30, "alone", session="c2")], {}, min_turns=2)
        >>> (u,) = found.units
        >>> ([m.content for m in u.unit.input.input_messages], u.unit.span_id, u.record.conversation["scope"], found.short)
        (['first', 'second'], '2222222222222222', 'bot/c1', 1)
    """
    found = Sessions()
    for session in group_sessions(restore_services(runs, seen) if seen is not None else runs):
        if len(session.turns) < min_turns:
            found.short += 1
            continue
        mark = seen.session_mark(session.service, session.session_id) if seen is not None else None
        revision = session_revision(mark, session.turns)
        if revision is None:
            found.behind += 1
            continue
        records = tuple(run_record(t, span_attributes.get((t.trace_id, t.span_id), {})) for t in session.turns)
        due = DueSession(session_scope(session.service, session.session_id), session.session_id, session.service,
                         records, revision=revision[0], partial=False, reason="files")
        record = replace(records[-1], conversation=conversation_of(due))
        convo = conversation_run(record)
        unit = replace(session.turns[-1], input=convo.input, output=convo.output)
        found.units.append(SessionUnit(unit, convo, record, revision[1]))
    return found


def file_sessions(loaded: Any, scorers: Sequence[Any], min_turns: int = 1) -> Sessions:
    """The sessions of the runs ``loaded`` from files (`collector.commands.inspect.Loaded`) when a
    scorer scores conversations (none otherwise), as `session_units` makes them.

    Example:
        >>> file_sessions(None, []).units
        []
    """
    if not any(is_conversation_scorer(scorer) for scorer in scorers):
        return Sessions()
    return session_units(loaded.runs, loaded.span_attributes, loaded.scored, min_turns)
