"""What the evaluation spans among the traces read say was scored before (issue 42, points 2 and 3):
successful scores per scorer version, the service a run came from, each session's latest revision."""

from __future__ import annotations

from typing import Any

from adapters import AgentRun, TraceSpan
from collector.commands.scored_before import ScoredBefore, restore_services, session_revision
from scorers._agent_types import ScorerRunInputForAgent, ScorerRunOutputForAgent

TRACE = "a" * 32


def evaluation(parent: str, scorer: str, version: Any = "1", service: str | None = "bot", **more: Any) -> TraceSpan:
    attributes = {"tracescore.scorer.id": scorer, **more}
    if version is not None:
        attributes["tracescore.scorer.version"] = version
    if service is not None:
        attributes["tracescore.scored.service"] = service
    return TraceSpan(TRACE, "e" * 16, parent, f"evaluation {scorer}", attributes=attributes)


def session_score(parent: str, revision: Any, turns: Any, service: str | None = "bot", scorer: str = "goal",
                  **more: Any) -> TraceSpan:
    return evaluation(parent, scorer, service=service, **{"session.id": "c1", "tracescore.session.revision": revision,
                                                          "tracescore.session.turns": turns, **more})


def run(span: str, service: str = "", session: str | None = "c1") -> AgentRun:
    return AgentRun(TRACE, span, "agent", service, "genai", 0, 1, ScorerRunInputForAgent(),
                    ScorerRunOutputForAgent([]), session_id=session)


def test_a_failed_score_is_not_scored_but_still_names_the_service() -> None:
    seen = ScoredBefore()
    seen.note([evaluation("1" * 16, "quality", **{"error.type": "ValueError"}), evaluation("2" * 16, "quality", None)])
    assert not seen.run_scored(TRACE, "1" * 16, ("quality", "1"))
    assert seen.service_of(TRACE, "1" * 16) == "bot"
    assert seen.run_scored(TRACE, "2" * 16, ("quality", None)) and not seen.run_scored(TRACE, "2" * 16, ("quality", "1"))


def test_spans_that_are_not_tracescores_are_left_alone() -> None:
    seen = ScoredBefore()
    seen.note([TraceSpan(TRACE, "1" * 16, None, "invoke_agent", attributes={"session.id": "c1"}),
               TraceSpan(TRACE, "2" * 16, None, "evaluation x", attributes={"tracescore.scorer.id": "x"})])  # no parent
    assert seen == ScoredBefore()


def test_a_sessions_latest_revision_wins_and_text_values_are_read() -> None:
    """Backends give attributes back as they kept them (Langfuse: text): the latest revision holds,
    with every scorer of that revision; a failed one names the revision but did not score it."""
    seen = ScoredBefore()
    seen.note([session_score("2" * 16, 1, 2), session_score("3" * 16, "2", "3"),
               session_score("3" * 16, 2, 3, scorer="tone"),
               session_score("3" * 16, 2, 3, scorer="broken", **{"error.type": "TimeoutError"})])
    mark = seen.session_mark("bot", "c1")
    assert mark is not None
    assert (mark.revision, mark.turns, mark.last, sorted(mark.scorers)) == (2, 3, (TRACE, "3" * 16),
                                                                           [("goal", "1"), ("tone", "1")])
    later = ScoredBefore()
    later.merge_sessions(seen)
    later.note([session_score("4" * 16, 3, 4)])
    assert later.session_mark("bot", "c1").revision == 3 and seen.session_mark("bot", "c1").revision == 2


def test_turns_without_a_service_take_their_sessions_only_when_one_is_named() -> None:
    seen = ScoredBefore()
    seen.note([session_score("3" * 16, 1, 3)])  # the conversation score names the session's service
    restored = restore_services([run("1" * 16), run("3" * 16), run("5" * 16, session=None),
                                 run("6" * 16, service="other", session="c2")], seen)
    assert [r.service for r in restored] == ["bot", "bot", "", "other"]
    two = ScoredBefore()
    two.note([session_score("3" * 16, 1, 3), session_score("4" * 16, 1, 2, service="billing")])
    assert [r.service for r in restore_services([run("1" * 16)], two)] == [""]  # two services share the key


def test_the_revision_follows_the_turns_read() -> None:
    seen = ScoredBefore()
    seen.note([session_score("2" * 16, 2, 2)])
    mark = seen.session_mark("bot", "c1")
    one, two, three = run("1" * 16), run("2" * 16), run("3" * 16)
    assert session_revision(mark, [one, two]) == (2, frozenset({("goal", "1")}))  # what was scored
    assert session_revision(mark, [one, two, three]) == (3, frozenset())  # a turn more: the next revision
    assert session_revision(mark, [two]) is None  # a window that cut the session: not scored back down
    assert session_revision(mark, [one, three]) is None  # as many turns, but not the ones scored
