"""Conversation scores (SPEC §7) in the Langfuse stand-in (bodies validated with the langfuse
package's own types): a session score with ``sessionId`` and no ``traceId``, one score per
(session, scorer, version) whatever the revision, and the last turn's trace for a key Langfuse
drops."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import aiohttp
import pytest
from langfuse_server import LangfuseServer

from collector.common.ids import score_span_id_for
from collector.common.session_types import SessionScore, session_scope
from collector.common.types import ScoreRecord
from collector.config import LangfuseSinkConfig
from collector.export.send.answers import Verdict
from collector.export.sinks import LangfuseSink

TRACES = ["0af7651916cd43dd8448eb211c80319c", "4bf92f3577b34da6a3ce929d0e0e4736", "5b8efff798038103d269b633813fc60c"]
RUN_SPAN = "eee19b7ec3c1b174"


def conversation_score(key: str, revision: int, score: float, turns: int = 3) -> ScoreRecord:
    """The goal scorer's score of revision ``revision`` of session ``key`` (its last turn the last trace)."""
    scope = session_scope("support-bot", key)
    session = SessionScore(scope, key, turns=turns, revision=revision, first_trace_id=TRACES[0],
                           first_span_id="b7ad6b7169203331", trace_ids=TRACES[:turns],
                           first_start_ns=1_700_000_000_000_000_000)
    record_key = f"session/{scope}/{revision}/goal/1"
    return ScoreRecord(record_key, TRACES[turns - 1], RUN_SPAN, score_span_id_for(record_key, str(score)), "goal",
                       "Goal met", "1", score=score, reason=f"revision {revision}",
                       scored_end_ns=1_700_000_100_000_000_000 + revision, session=session.to_dict())


@pytest.fixture
async def langfuse() -> AsyncIterator[LangfuseServer]:
    server = await LangfuseServer().start()
    yield server
    await server.stop()


async def send_all(server: LangfuseServer, records: list[ScoreRecord]) -> list[Verdict]:
    sink = LangfuseSink(LangfuseSinkConfig(host=server.url, public_key=server.public_key,
                                           secret_key=server.secret_key))
    async with aiohttp.ClientSession() as http:
        return [(await sink.send(http, record)).verdict for record in records]


async def test_a_session_score_is_on_the_session_and_a_revision_updates_it(langfuse: LangfuseServer) -> None:
    first, second = conversation_score("chat-42", 1, 0.2, turns=2), conversation_score("chat-42", 2, 0.9)
    assert await send_all(langfuse, [first, second]) == [Verdict.SENT, Verdict.SENT]
    assert langfuse.posts == 2 and not langfuse.refused
    (score,) = langfuse.scores.values()  # the second post updated the first score
    assert score["sessionId"] == "chat-42" and "traceId" not in score and "observationId" not in score
    assert (score["value"], score["comment"], score["metadata"]["revision"], score["metadata"]["turns"]) == (
        0.9, "revision 2", "2", "3")
    assert langfuse.by_session() == {("chat-42", "Goal met"): [score]}


async def test_a_run_score_and_a_session_score_never_share_an_id(langfuse: LangfuseServer) -> None:
    session = conversation_score("chat-7", 1, 0.4)
    run = ScoreRecord(f"{session.trace_id}/{RUN_SPAN}/goal/1", session.trace_id, RUN_SPAN, "00f067aa0ba902b7",
                      "goal", "Goal met", "1", score=0.4, scored_end_ns=session.scored_end_ns)
    assert await send_all(langfuse, [session, run]) == [Verdict.SENT, Verdict.SENT]
    assert len(langfuse.scores) == 2 and len(langfuse.by_session()) == 1


@pytest.mark.parametrize("key", ["k" * 201, "sesión-7", "chat\t42"])
async def test_a_key_langfuse_drops_puts_the_score_on_the_last_turns_trace(
    langfuse: LangfuseServer, key: str, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="collector.export.sinks.langfuse")
    records = [conversation_score(key, 1, 0.2, turns=2), conversation_score(key, 2, 0.7),
               conversation_score("other-" + key, 1, 0.5)]
    assert await send_all(langfuse, records) == [Verdict.SENT] * 3
    assert not langfuse.refused and not langfuse.by_session()
    by_key = {body["metadata"]["session_id"]: body for body in langfuse.scores.values()}
    assert len(langfuse.scores) == 2 and set(by_key) == {key, "other-" + key}  # one per session: revisions update
    score = by_key[key]
    assert score["traceId"] == TRACES[2] and "observationId" not in score and score["value"] == 0.7
    said = [r for r in caplog.records if "does not store" in r.getMessage()]
    assert len(said) == 2  # once per session, not per revision
    assert all(key not in r.getMessage() for r in said)  # the scope (hashed), never the raw key
