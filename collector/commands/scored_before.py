"""What tracescore scored before, as the traces ``score`` reads say (SPEC §5, §7, §10).

Every score tracescore exports is an ``evaluation <scorer>`` span in the scored run's trace,
child of the run span, naming its scorer and version (``tracescore.scorer.*``) and the service
the run came from (``tracescore.scored.service``); a conversation score also names its session,
revision and turn count (``session.id``, ``tracescore.session.*``). The backends keep those spans
with the agent's, so a backfill reading traces back finds in them what was scored already
(`ScoredBefore`):

- a run already scored by a scorer version (a successful evaluation span under its run span)
  is not scored again unless ``--rescore``;
- the service of a run read without one (Phoenix keeps no resource): the one its evaluation
  spans name, so a conversation read back is the session the daemon scored, with its scope,
  ids and run ids (`restore_services`);
- each session's latest revision, its turn count and its last turn: the same turns are that
  revision again (its scorers already scored are skipped), more turns are the next revision,
  fewer (a window that cut the session) are not scored, since that would take its score back
  (`session_revision`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from adapters import AgentRun, TraceSpan
from collector.export.evaluation import (
    ERROR_TYPE,
    SESSION_ID,
    TS_SCORED_SERVICE,
    TS_SCORER_ID,
    TS_SCORER_VERSION,
    TS_SESSION_REVISION,
    TS_SESSION_TURNS,
)

__all__ = ["ScoredBefore", "SessionMark", "restore_services", "scorer_key", "session_revision"]

ScorerKey = tuple[str, str | None]
"""A scorer's id and version (None: it has none), as its evaluation spans name it."""


def scorer_key(scorer: Any) -> ScorerKey:
    """The id and version of a loaded scorer, as its evaluation spans name them.

    Example:
        >>> class Quality:
        ...     id, version = "quality", 2
        >>> scorer_key(Quality())
        ('quality', '2')
    """
    version = getattr(scorer, "version", None)
    return str(getattr(scorer, "id", "")), None if version is None else str(version)


def _count(value: Any) -> int | None:
    """An attribute's integer (a backend may give it back as text): None when it is none."""
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


@dataclass
class SessionMark:
    """The latest score of a session found in the traces read.

    Attributes:
        service: the service its score names (empty: it was scored from runs without one).
        session_id: its key as the spans carry it.
        revision: the revision scored.
        turns: how many turns that revision had.
        last: the trace and run span its score sits on: the session's last turn then.
        scorers: the scorers (id, version) that scored that revision (failures left out).
    """

    service: str
    session_id: str
    revision: int
    turns: int
    last: tuple[str, str]
    scorers: set[ScorerKey] = field(default_factory=set)


@dataclass
class ScoredBefore:
    """The evaluation spans of the traces read: runs scored, their services, sessions' latest marks.

    Example:
        >>> def evaluation(parent, scorer, **more):
        ...     return TraceSpan("a" * 32, "e" * 16, parent, f"evaluation {scorer}", attributes={
        ...         "tracescore.scorer.id": scorer, "tracescore.scorer.version": "1",
        ...         "tracescore.scored.service": "bot", **more})
        >>> seen = ScoredBefore()
        >>> seen.note([evaluation("1" * 16, "quality"), evaluation("2" * 16, "frustration", **{
        ...     "session.id": "c1", "tracescore.session.revision": 2, "tracescore.session.turns": "3"})])
        >>> seen.run_scored("a" * 32, "1" * 16, ("quality", "1")), seen.run_scored("a" * 32, "1" * 16, ("quality", "2"))
        (True, False)
        >>> mark = seen.session_mark("bot", "c1")
        >>> (mark.revision, mark.turns, mark.last[1], sorted(mark.scorers), seen.service_of("a" * 32, "1" * 16))
        (2, 3, '2222222222222222', [('frustration', '1')], 'bot')
    """

    runs: set[tuple[str, str, str, str | None]] = field(default_factory=set)
    services: dict[tuple[str, str], str] = field(default_factory=dict)
    sessions: dict[tuple[str, str], SessionMark] = field(default_factory=dict)

    def note(self, spans: Iterable[TraceSpan]) -> None:
        """Take in the evaluation spans among ``spans`` (others are left alone)."""
        for span in spans:
            attributes = span.attributes
            scorer_id = attributes.get(TS_SCORER_ID)
            if scorer_id is None or span.parent_span_id is None:
                continue
            version = attributes.get(TS_SCORER_VERSION)
            scorer: ScorerKey = (str(scorer_id), None if version is None else str(version))
            scored = attributes.get(ERROR_TYPE) is None
            service = str(attributes.get(TS_SCORED_SERVICE) or "")
            parent = (span.trace_id, span.parent_span_id)
            if service:
                self.services.setdefault(parent, service)
            session_id, revision = attributes.get(SESSION_ID), _count(attributes.get(TS_SESSION_REVISION))
            if session_id is None or revision is None:
                if scored:
                    self.runs.add((*parent, *scorer))
                continue
            turns = _count(attributes.get(TS_SESSION_TURNS)) or 0
            self._note_session(SessionMark(service, str(session_id), revision, turns, parent,
                                           {scorer} if scored else set()))

    def _note_session(self, mark: SessionMark) -> None:
        key = (mark.service, mark.session_id)
        held = self.sessions.get(key)
        if held is None or mark.revision > held.revision:
            self.sessions[key] = mark
        elif mark.revision == held.revision:
            held.scorers |= mark.scorers

    def merge_sessions(self, other: ScoredBefore) -> None:
        """Take in ``other``'s session marks (a backfill keeps them across pages, runs per page)."""
        for mark in other.sessions.values():
            self._note_session(SessionMark(mark.service, mark.session_id, mark.revision, mark.turns, mark.last,
                                           set(mark.scorers)))

    def run_scored(self, trace_id: str, span_id: str, scorer: ScorerKey) -> bool:
        """Whether the run on ``span_id`` has a successful score of ``scorer`` (id, version)."""
        return (trace_id, span_id, *scorer) in self.runs

    def service_of(self, trace_id: str, span_id: str) -> str | None:
        """The service the evaluation spans of the run on ``span_id`` name, if any."""
        return self.services.get((trace_id, span_id))

    def session_mark(self, service: str, session_id: str) -> SessionMark | None:
        """The latest score found of the session ``service``/``session_id``."""
        return self.sessions.get((service, session_id))

    def session_services(self, session_id: str) -> set[str]:
        """The services that scored sessions of key ``session_id`` name (empty ones left out)."""
        return {service for service, key in self.sessions if key == session_id and service}


def restore_services(runs: Sequence[AgentRun], seen: ScoredBefore) -> list[AgentRun]:
    """``runs``, each read without a service given the one its evaluation spans name, and each
    turn of a session still without one given the service of its session when the traces name
    exactly one for its key (its other turns', or its conversation score's). Runs with a service
    are left as they are.

    Example:
        >>> from scorers._agent_types import ScorerRunInputForAgent, ScorerRunOutputForAgent
        >>> def run(span, service="", session=None):
        ...     return AgentRun("a" * 32, span, "agent", service, "genai", 0, 1, ScorerRunInputForAgent(),
        ...                     ScorerRunOutputForAgent([]), session_id=session)
        >>> seen = ScoredBefore(services={("a" * 32, "2" * 16): "bot"})
        >>> found = restore_services([run("1" * 16, session="c1"), run("2" * 16, session="c1"), run("3" * 16)], seen)
        >>> [(r.service, r.request_context.get("service")) for r in found]
        [('bot', 'bot'), ('bot', 'bot'), ('', None)]
    """
    restored = [r.with_service(s) if not r.service and (s := seen.service_of(r.trace_id, r.span_id)) else r
                for r in runs]
    unnamed = {r.session_id for r in restored if not r.service and r.session_id is not None}
    if not unnamed:
        return restored
    known: dict[str, set[str]] = {key: seen.session_services(key) for key in unnamed}
    for r in restored:
        if r.service and r.session_id in known:
            known[r.session_id].add(r.service)
    return [r.with_service(next(iter(known[r.session_id])))
            if not r.service and r.session_id is not None and len(known[r.session_id]) == 1 else r
            for r in restored]


def session_revision(mark: SessionMark | None, turns: Sequence[Any]) -> tuple[int, frozenset[ScorerKey]] | None:
    """The revision a session of ``turns`` (each with ``trace_id`` and ``span_id``, by start time)
    is scored as, given its latest score found (``mark``), and the scorers that already scored
    that revision; None when the turns are fewer than (or not) the ones already scored, so scoring
    them would take the session's score back.

    Example:
        >>> from types import SimpleNamespace as T
        >>> turns = [T(trace_id="a", span_id="1"), T(trace_id="b", span_id="2")]
        >>> session_revision(None, turns)
        (1, frozenset())
        >>> mark = SessionMark("bot", "c1", 2, 2, ("b", "2"), {("goal", "1")})
        >>> session_revision(mark, turns), session_revision(mark, [*turns, T(trace_id="c", span_id="3")])[0]
        ((2, frozenset({('goal', '1')})), 3)
        >>> session_revision(mark, turns[:1]) is None
        True
    """
    if mark is None:
        return 1, frozenset()
    last = (turns[-1].trace_id, turns[-1].span_id) if turns else ("", "")
    if len(turns) == mark.turns and last == mark.last:
        return mark.revision, frozenset(mark.scorers)
    if len(turns) > mark.turns:
        return mark.revision + 1, frozenset()
    return None

