"""``[sinks.langfuse]``: each score as a Langfuse score.

``POST /api/public/scores`` with basic auth (public key, secret key): traceId = the OTel
trace id in hex, observationId = the scored span id in hex (how Langfuse names what it
received over OTLP), name = the scorer's name, value, dataType NUMERIC, comment = the
reason, metadata. Langfuse upserts a score on its id and timestamp: both are fixed per
score (the id from its key, the timestamp the scored span's end), so a second send, or a new
outcome of the score (its metadata then names the new evaluation span), updates the same score.

A conversation score (SPEC §7) is a session score: ``sessionId`` = the key as the spans carry it
and no ``traceId`` (Langfuse takes exactly one of them, and its Sessions view shows only scores
with their own session id). Its id comes from the session, scorer and version (not the
revision) and its timestamp is the session's first turn's start, so each revision updates the
same score. Langfuse drops session ids it cannot store (over 200 characters or not printable
ASCII: `collector.common.session_types.key_is_storable`), so such a session's score goes on its last
turn's trace instead, with the key in its metadata (``session_id``), logged once per session.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from typing import Any

import aiohttp

from collector.common.session_types import key_is_storable
from collector.common.types import ScoreRecord
from collector.config import LangfuseSinkConfig, secret_value
from collector.export.send.answers import Answer
from collector.export.sinks.base import (
    answer_of,
    key_uuid,
    request,
    score_metadata,
    session_digest,
    session_of,
)

logger = logging.getLogger(__name__)


def timestamp(record: ScoreRecord) -> str:
    """The score's timestamp, fixed per score (Langfuse upserts on id, name and the timestamp's
    date): when the scored span ended (when scoring started, if unknown); for a conversation
    score, when the session's first turn started (the same for every revision).

    Example:
        >>> timestamp(ScoreRecord("k", "t", "s", "x", "q", "Q", scored_end_ns=1_700_000_000_000_000_000))
        '2023-11-14T22:13:20.000000Z'
        >>> from collector.common.session_types import SessionScore
        >>> timestamp(ScoreRecord("k", "t", "s", "x", "q", "Q", scored_end_ns=1_700_000_000_000_000_000,
        ...     session=SessionScore("bot/c1", "c1", first_start_ns=1_600_000_000_000_000_000).to_dict()))
        '2020-09-13T12:26:40.000000Z'
    """
    session = session_of(record)
    ns = (session.first_start_ns if session else 0) or record.scored_end_ns or record.start_ns
    return datetime.fromtimestamp(ns / 1e9, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def score_body(record: ScoreRecord) -> dict[str, Any]:
    """The ``CreateScoreRequest`` of one score.

    Example:
        >>> body = score_body(ScoreRecord("k", "ab" * 16, "cd" * 8, "x", "q", "Quality", score=0.2, reason="off"))
        >>> (body["traceId"], body["observationId"], body["name"], body["value"], body["dataType"], body["comment"])
        ('abababababababababababababababab', 'cdcdcdcdcdcdcdcd', 'Quality', 0.2, 'NUMERIC', 'off')
    """
    body: dict[str, Any] = {
        "id": key_uuid(record, "langfuse"),
        "traceId": record.trace_id,
        "observationId": record.span_id,
        "name": record.scorer_name,
        "value": record.score,
        "dataType": "NUMERIC",
        "timestamp": timestamp(record),
        "metadata": score_metadata(record),
    }
    if record.reason is not None:
        body["comment"] = record.reason
    return body


def session_score_body(record: ScoreRecord) -> dict[str, Any]:
    """The ``CreateScoreRequest`` of a conversation score: on the session (``sessionId``, no
    ``traceId``), or, for a key Langfuse drops, on the last turn's trace with the key in its metadata.

    Example:
        >>> from collector.common.session_types import SessionScore
        >>> def rec(key): return ScoreRecord(f"session/bot/{key}/1/q/1", "ab" * 16, "cd" * 8, "x", "q", "Goal", "1",
        ...     score=1.0, session=SessionScore(f"bot/{key}", key, turns=3).to_dict())
        >>> body = session_score_body(rec("c1"))
        >>> body["sessionId"], "traceId" in body, "observationId" in body
        ('c1', False, False)
        >>> body = session_score_body(rec("x" * 201))
        >>> body["traceId"], "sessionId" in body, body["metadata"]["session_id"] == "x" * 201
        ('abababababababababababababababab', False, True)
    """
    session = session_of(record)
    if session is None:
        raise ValueError(f"score {record.key} is not a conversation score")
    body = score_body(record)
    del body["traceId"], body["observationId"]
    body["id"] = str(uuid.UUID(session_digest(record, "langfuse")))
    if key_is_storable(session.session_id):
        return {**body, "sessionId": session.session_id}
    return {**body, "traceId": record.trace_id, "metadata": {**body["metadata"], "session_id": session.session_id}}


class LangfuseSink:
    """Langfuse's public scores API.

    Example:
        >>> LangfuseSink(LangfuseSinkConfig(host="https://cloud.langfuse.com", public_key="pk", secret_key="sk")).url
        'https://cloud.langfuse.com/api/public/scores'
    """

    name = "langfuse"

    def __init__(self, cfg: LangfuseSinkConfig) -> None:
        self.url = f"{cfg.url()}/api/public/scores"
        self._auth = aiohttp.BasicAuth(secret_value(cfg.public_key, "sinks.langfuse.public_key"),
                                       secret_value(cfg.secret_key, "sinks.langfuse.secret_key"))
        self._told: dict[str, None] = {}  # sessions whose key was said to be unstorable (bounded, oldest out)

    async def send(self, session: aiohttp.ClientSession, record: ScoreRecord) -> Answer:
        """Create or update the score (a conversation score: the session's)."""
        if record.session is None:
            body = score_body(record)
        else:
            body = session_score_body(record)
            if "traceId" in body:
                self._tell_unstorable(record)
        status, text = await request(session, self.name, "POST", self.url, json=body, auth=self._auth)
        return answer_of(status, text)

    def _tell_unstorable(self, record: ScoreRecord) -> None:
        """Log, once per session, that its score goes on its last turn's trace."""
        scope = str((record.session or {}).get("scope", ""))
        if scope in self._told:
            return
        if len(self._told) >= 10_000:
            del self._told[next(iter(self._told))]
        self._told[scope] = None
        logger.warning("langfuse sink: session %s has a key Langfuse does not store (over 200 characters or "
                       "not printable ASCII); its scores go on its last turn's trace %s, the key in their "
                       "metadata", scope, record.trace_id)
