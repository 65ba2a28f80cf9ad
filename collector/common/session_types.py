"""The data of conversations (SPEC §7) as it flows between the daemon's stages.

assemble -> store: a `SessionTurn` per run that names a session (noted with its trace's
decision). store -> assemble: a `DueSession` when a session is due (idle, ended, too old,
too long or forced out), which becomes one conversation job per conversation scorer: a
`ScoreJob` whose `RunRecord` is the session's last turn (where the score lands) with the
session in ``RunRecord.conversation`` (`conversation_of`). work -> export: a
`ScoreRecord` whose ``session`` (`SessionScore.to_dict`) says which session it scored.

A session is named across a deployment by its `session_scope`: the service and the key
the spans carry (two services never share a session), hashed when the key is not fit to
be stored (over `MAX_KEY_CHARS` characters, or not printable ASCII). Destinations get the
key as the spans carry it (``session_id``), never the scope. Its turns read back from a
backend that keeps no service name (Phoenix) take the service their earlier scores name
(`collector.commands.scored_before`), so a backfill names the session, and derives its ids
(job key, run id, evaluation span ids), as the daemon did.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from collector.common.record_json import known_fields, record_dict
from collector.common.types import RunRecord

__all__ = [
    "MAX_KEY_CHARS",
    "DueSession",
    "SessionScore",
    "SessionTurn",
    "arrival",
    "conversation_of",
    "key_is_storable",
    "session_scope",
]

MAX_KEY_CHARS = 200
"""A session key longer than this is hashed where tracescore stores it (Langfuse drops such ids)."""


def key_is_storable(session_id: str) -> bool:
    """Whether ``session_id`` is stored as it is: at most `MAX_KEY_CHARS` printable ASCII characters.

    Example:
        >>> key_is_storable("chat-42"), key_is_storable("x" * 201), key_is_storable("sesión")
        (True, False, False)
    """
    return len(session_id) <= MAX_KEY_CHARS and session_id.isascii() and session_id.isprintable()


def _hashed(value: str) -> str:
    return "sha256:" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def session_scope(service: str, session_id: str) -> str:
    """The name of a session across a deployment: ``service/key``, the key hashed (``sha256:``
    and 32 hex digits) when it is not `key_is_storable`, the service too when it is not or
    holds a ``/`` (so the first ``/`` always ends the service).

    Example:
        >>> session_scope("support-bot", "chat-42"), session_scope("support-bot", "user/7")
        ('support-bot/chat-42', 'support-bot/user/7')
        >>> session_scope("support-bot", "x" * 300)
        'support-bot/sha256:0d4e2ca9e9cbced7a7a5380eb29e1a37'
        >>> session_scope("bot", "a/b") == session_scope("bot/a", "b")
        False
    """
    service_part = service if key_is_storable(service) and "/" not in service else _hashed(service)
    return f"{service_part}/{session_id if key_is_storable(session_id) else _hashed(session_id)}"


@dataclass(frozen=True)
class SessionTurn:
    """One run that is a turn of a session, as assembly notes it.

    Attributes:
        scope: the session's `session_scope`.
        session_id: the key as the spans carry it.
        run: the turn.
        ended: its run span (or trace) carries the end marker (``tracescore.session.end``).
        arrived_at: when its trace was whole at a receiver (epoch seconds), which the session's
            idle time counts from; None: when it is noted.
    """

    scope: str
    session_id: str
    run: RunRecord
    ended: bool = False
    arrived_at: float | None = None


def arrival(turns: Sequence[SessionTurn], now: float) -> float:
    """When the latest of ``turns`` arrived (`SessionTurn.arrived_at`; one without it, or one
    said to arrive after ``now``, arrived ``now``): what a session's idle time counts from.

    Example:
        >>> def turn(at): return SessionTurn("bot/c1", "c1", RunRecord("a" * 32, "1" * 16), arrived_at=at)
        >>> arrival([turn(40.0), turn(45.0)], 50.0), arrival([turn(None)], 50.0), arrival([turn(99.0)], 50.0)
        (45.0, 50.0, 50.0)
    """
    return max(min(now, turn.arrived_at if turn.arrived_at is not None else now) for turn in turns)


@dataclass(frozen=True)
class DueSession:
    """A session to score now.

    Attributes:
        scope: its `session_scope`; ``session_id``: its key as the spans carry it; ``service``.
        turns: its turns, by start time.
        revision: 1 for its first score, one more for each reopening by a late turn.
        partial: scored before it was over (``max_age_s``, ``max_turns``, forced out by
            ``max_open``, or a turn known to be missing).
        reason: why now: ``idle``, ``ended``, ``max_age``, ``max_turns`` or ``forced``.
    """

    scope: str
    session_id: str
    service: str
    turns: tuple[RunRecord, ...]
    revision: int = 1
    partial: bool = False
    reason: str = "idle"


@dataclass(frozen=True)
class SessionScore:
    """What a conversation score says about its session (``ScoreRecord.session``).

    Example:
        >>> s = SessionScore("bot/c1", "c1", turns=3, revision=2, first_trace_id="ab" * 16, first_span_id="cd" * 8)
        >>> SessionScore.from_dict(s.to_dict()) == s
        True
    """

    scope: str
    session_id: str
    turns: int = 0
    revision: int = 1
    partial: bool = False
    first_trace_id: str = ""  # the session's first turn: where MLflow keeps the session's assessments
    first_span_id: str = ""
    trace_ids: list[str] = field(default_factory=list)  # every turn's trace, in order
    first_start_ns: int = 0  # when its first turn started: fixed across revisions (Langfuse's score timestamp)

    def to_dict(self) -> dict[str, Any]:
        """Its fields as a JSON-ready dict."""
        return record_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionScore:
        """Read `to_dict` output (fields a later version added are ignored)."""
        return cls(**known_fields(cls, data))


def conversation_of(due: DueSession) -> dict[str, Any]:
    """The ``RunRecord.conversation`` of a due session's jobs: the session and every turn.

    Example:
        >>> turn = RunRecord("ab" * 16, "cd" * 8, service="bot")
        >>> c = conversation_of(DueSession("bot/c1", "c1", "bot", (turn,), revision=2))
        >>> (c["scope"], c["revision"], c["partial"], RunRecord(**c["turns"][0]) == turn)
        ('bot/c1', 2, False, True)
    """
    return {
        "scope": due.scope, "session_id": due.session_id, "service": due.service,
        "revision": due.revision, "partial": due.partial, "reason": due.reason,
        "first_trace_id": due.turns[0].trace_id if due.turns else "",
        "turns": [record_dict(turn) for turn in due.turns],
    }
