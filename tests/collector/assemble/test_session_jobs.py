"""Conversation jobs of due sessions (SPEC §7): keyed by session, revision and first turn, so a
revision is a new job, the same revision queued twice (a scheduler that died) is one, and a
session key reused for a new conversation after the old one was forgotten is scored again."""

from __future__ import annotations

from collector.assemble.sessions import session_jobs
from collector.common.session_types import DueSession
from collector.common.types import RunRecord
from collector.config import ScorerConfig
from collector.work.registry import RegisteredScorer, ScorerRegistry
from scorers import create_scorer

REGISTRY = ScorerRegistry([RegisteredScorer(
    create_scorer(id="goal", description="d", type="conversation", version="1").generate_score(lambda run: 1.0),
    ScorerConfig(ref="m:goal"))])


def _turns(*trace_hex: str) -> tuple[RunRecord, ...]:
    return tuple(RunRecord(t * 32, f"{i + 1:016x}", service="bot", start_ns=i) for i, t in enumerate(trace_hex))


def _key(due: DueSession) -> str:
    (job,) = session_jobs(due, REGISTRY)
    return job.key


def test_revisions_are_new_jobs_and_a_retake_is_the_same_job() -> None:
    first = DueSession("bot/c1", "c1", "bot", _turns("a", "b"))
    assert _key(first) == _key(DueSession("bot/c1", "c1", "bot", _turns("a", "b")))
    assert _key(first) != _key(DueSession("bot/c1", "c1", "bot", _turns("a", "b", "c"), revision=2))


def test_a_reused_session_key_is_a_new_conversation() -> None:
    old = DueSession("bot/c1", "c1", "bot", _turns("a", "b"))
    new = DueSession("bot/c1", "c1", "bot", _turns("d", "e"))  # the old one forgotten: revision 1 again
    assert _key(old) != _key(new)


def test_a_run_scorer_gets_no_conversation_job() -> None:
    registry = ScorerRegistry([RegisteredScorer(
        create_scorer(id="run", description="d", type="agent").generate_score(lambda run: 1.0), ScorerConfig(ref="m:r"))])
    assert session_jobs(DueSession("bot/c1", "c1", "bot", _turns("a")), registry) == []
