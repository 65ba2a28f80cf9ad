"""Conversation scores (SPEC §7) for the backend tests: a session's score record of one revision,
as the daemon hands it to the sinks, and a way to send records through a real sink client."""

from __future__ import annotations

import asyncio

import aiohttp
from backends_support import Turn

from collector.common.ids import score_span_id_for
from collector.common.session_types import SessionScore, session_scope
from collector.common.types import ScoreRecord
from collector.export.send.answers import Verdict
from collector.export.sinks import SinkClient

SCORER = "Goal met"
"""The conversation scorer's name, as the README's session queries name it."""


def session_record(session_id: str, turns: list[Turn], revision: int, score: float) -> ScoreRecord:
    """The ``goal`` scorer's score of ``revision`` of a session: on its last turn's run span."""
    scope = session_scope("support-bot", session_id)
    session = SessionScore(scope, session_id, turns=len(turns), revision=revision,
                           first_trace_id=turns[0].trace_id, first_span_id=turns[0].span_id,
                           trace_ids=[t.trace_id for t in turns], first_start_ns=turns[0].start_ns)
    key = f"session/{scope}/{revision}/goal/1"
    last = turns[-1]
    return ScoreRecord(key, last.trace_id, last.span_id, score_span_id_for(key, repr(score)), "goal", SCORER, "1",
                       score=score, reason=f"revision {revision}", llm_judged=True, session=session.to_dict())


def send(client: SinkClient, *records: ScoreRecord) -> list[Verdict]:
    """Send ``records`` one after the other through a sink client, as its sender does: how the
    backend answered each."""
    async def run() -> list[Verdict]:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http:
            return [(await client.send(http, record)).verdict for record in records]
    return asyncio.run(run())
