"""``tracescore inspect --sessions``: the conversations the runs of saved files make.

A session is the runs of one service that carry one session key (SPEC §7,
`adapters._session`), its turns ordered by start time. Runs without a key belong to none;
the view counts them apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rich.table import Table

from adapters import AgentRun

__all__ = ["SessionSummary", "group_sessions", "session_row", "sessions_table"]


@dataclass
class SessionSummary:
    """The turns of one session found in the files, ordered by start time."""

    service: str
    session_id: str
    turns: list[AgentRun] = field(default_factory=list)

    @property
    def first_ns(self) -> int:
        """When its first turn started (ns since the epoch)."""
        return min(t.start_ns for t in self.turns)

    @property
    def last_ns(self) -> int:
        """When its last turn ended (ns since the epoch)."""
        return max(t.end_ns for t in self.turns)


def group_sessions(runs: Iterable[AgentRun]) -> list[SessionSummary]:
    """The sessions the runs make, by (service, session key), in order of their first turn;
    each session's turns by start time. Runs without a key are left out.

    Example:
        >>> from adapters import AgentRun
        >>> from scorers._agent_types import ScorerRunInputForAgent, ScorerRunOutputForAgent
        >>> def turn(span, start, session, service="bot"):
        ...     return AgentRun("a" * 32, span, "agent", service, "genai", start, start + 5,
        ...                     ScorerRunInputForAgent(), ScorerRunOutputForAgent([]), session_id=session)
        >>> found = group_sessions([turn("2" * 16, 20, "s1"), turn("1" * 16, 10, "s1"),
        ...                         turn("3" * 16, 15, "s1", service="other"), turn("4" * 16, 5, None)])
        >>> [(s.service, s.session_id, [t.span_id[0] for t in s.turns]) for s in found]
        [('bot', 's1', ['1', '2']), ('other', 's1', ['3'])]
    """
    sessions: dict[tuple[str, str], SessionSummary] = {}
    for run in runs:
        if run.session_id is None:
            continue
        key = (run.service, run.session_id)
        sessions.setdefault(key, SessionSummary(run.service, run.session_id)).turns.append(run)
    for session in sessions.values():
        session.turns.sort(key=lambda t: (t.start_ns, t.trace_id, t.span_id))
    return sorted(sessions.values(), key=lambda s: (s.first_ns, s.service, s.session_id))


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def session_row(session: SessionSummary) -> dict[str, Any]:
    """One session as a JSON row: ``{service, session_id, turns, first, last, traces}``
    (times as ISO 8601 UTC; ``traces``: the turns' trace ids in order)."""
    return {
        "service": session.service,
        "session_id": session.session_id,
        "turns": len(session.turns),
        "first": _iso(session.first_ns),
        "last": _iso(session.last_ns),
        "traces": [t.trace_id for t in session.turns],
    }


def sessions_table(sessions: Sequence[SessionSummary], unkeyed: int) -> Table:
    """The sessions as a rich table (``unkeyed``: runs that belong to no session, in the title)."""
    table = Table(title=f"{len(sessions)} session(s); {unkeyed} run(s) without a session key", show_lines=False)
    for name in ("service", "session", "turns", "first", "last"):
        table.add_column(name, overflow="fold")
    for s in sessions:
        table.add_row(s.service, s.session_id, str(len(s.turns)), _iso(s.first_ns), _iso(s.last_ns))
    return table
