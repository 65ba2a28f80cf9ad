"""Deciding a trace notes its runs that are turns of a session (SPEC §7): scoped by service,
the end marker read from the run span or the trace's root, an unstorable key hashed and
logged once; only when a conversation scorer is registered."""

from __future__ import annotations

import logging

import pytest
from conversation_traces import turn_body, without_root

import adapters
from collector.assemble.decide import RunDecider
from collector.common.metrics import Metrics
from collector.common.types import TraceChunk
from collector.config import ScorerConfig, SessionsConfig
from collector.work.registry import RegisteredScorer, ScorerRegistry
from scorers import create_scorer

CONVERSATION = create_scorer(id="c", description="d", type="conversation").generate_score(lambda run: 1.0)
RUN = create_scorer(id="r", description="d", type="agent").generate_score(lambda run: 1.0)


def _decide(body: bytes, trace_id: str, scorers: list, sessions: SessionsConfig | None = None):
    registry = ScorerRegistry([RegisteredScorer(s, ScorerConfig(ref=f"m:{s.id}")) for s in scorers])
    decider = RunDecider(adapters, registry, Metrics(), sessions or SessionsConfig())
    chunk = TraceChunk(bytes.fromhex(trace_id), "spans", body, 2, True)
    return decider, decider.decide(bytes.fromhex(trace_id), [chunk])


def test_a_turn_is_noted_with_its_scope_and_the_run_scorers_get_their_jobs() -> None:
    body, trace_id, span_id = turn_body("chat-1", 1)
    _, decided = _decide(body, trace_id, [CONVERSATION, RUN])
    (turn,) = decided.turns
    assert (turn.scope, turn.session_id, turn.run.span_id, turn.ended) == ("support-bot/chat-1", "chat-1", span_id, False)
    assert turn.run.session_id == "chat-1"
    assert [job.scorer_id for job in decided.jobs] == ["r"]  # the conversation scorer waits for the session


def test_no_turn_is_noted_without_a_conversation_scorer() -> None:
    body, trace_id, _ = turn_body("chat-1", 0)
    _, decided = _decide(body, trace_id, [RUN])
    assert decided.turns == [] and len(decided.jobs) == 1


@pytest.mark.parametrize("on_root", [False, True])
def test_the_end_marker_on_the_run_span_or_the_root(on_root: bool) -> None:
    body, trace_id, _ = turn_body("chat-1", 2, end=True, on_root=on_root)
    _, decided = _decide(body, trace_id, [CONVERSATION])
    assert [t.ended for t in decided.turns] == [True]


def test_a_configured_end_attribute_and_extra_key() -> None:
    body, trace_id, _ = turn_body("t-9", 0, key="thread.id", on_root=True)
    _, decided = _decide(body, trace_id, [CONVERSATION], SessionsConfig(extra_keys=["thread.id"]))
    assert [t.session_id for t in decided.turns] == ["t-9"]


def test_an_unstorable_key_is_hashed_where_stored_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    key = "conversation-" + "x" * 300
    body, trace_id, _ = turn_body(key, 0)
    caplog.set_level(logging.WARNING, logger="collector.assemble.decide")
    decider, decided = _decide(body, trace_id, [CONVERSATION])
    (turn,) = decided.turns
    assert turn.session_id == key and turn.run.session_id == key  # destinations get it as the spans carry it
    assert turn.scope.startswith("support-bot/sha256:") and len(turn.scope) < 64
    chunk = TraceChunk(bytes.fromhex(trace_id), "spans", body, 2, True)
    decider.decide(bytes.fromhex(trace_id), [chunk])  # the same session again
    warnings = [r.getMessage() for r in caplog.records if "not printable ASCII" in r.getMessage()]
    assert len(warnings) == 1 and turn.scope in warnings[0]


def test_a_turn_whose_trace_lost_its_root_is_incomplete_but_a_called_service_is_not() -> None:
    """The root of the turn's trace never arrived: the turn is marked incomplete (its conversation
    will be scored partial). A turn whose top span is a child of another service's span (the
    OTLP flags say the parent is remote) is complete, as is a whole one."""
    body, trace_id, _ = turn_body("chat-1", 0, wrapped=True)
    _, decided = _decide(without_root(body), trace_id, [CONVERSATION, RUN])
    assert [t.run.incomplete for t in decided.turns] == [True]
    assert [job.run.incomplete for job in decided.jobs] == [False]  # the run's own job is as always
    body, trace_id, _ = turn_body("chat-1", 0, remote_parent=True)
    _, decided = _decide(body, trace_id, [CONVERSATION])
    assert [t.run.incomplete for t in decided.turns] == [False]
    _, decided = _decide(*turn_body("chat-1", 0, wrapped=True)[:2], [CONVERSATION])
    assert [t.run.incomplete for t in decided.turns] == [False]
