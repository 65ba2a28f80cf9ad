"""``[sinks.langfuse]``: each score as a Langfuse score.

``POST /api/public/scores`` with basic auth (public key, secret key): traceId = the OTel
trace id in hex, observationId = the scored span id in hex (how Langfuse names what it
received over OTLP), name = the scorer's name, value, dataType NUMERIC, comment = the
reason, metadata. Langfuse upserts a score on its id and timestamp: both are fixed per
score (the id from its key, the timestamp the scored span's end), so a second send, or a new
outcome of the score (its metadata then names the new evaluation span), updates the same score.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import aiohttp

from collector.config import LangfuseSinkConfig, secret_value
from collector.export.sinks.base import Answer, answer_of, key_uuid, request, score_metadata
from collector.types import ScoreRecord


def timestamp(record: ScoreRecord) -> str:
    """The score's timestamp: when the scored span ended (when scoring started, if unknown).

    Example:
        >>> timestamp(ScoreRecord("k", "t", "s", "x", "q", "Q", scored_end_ns=1_700_000_000_000_000_000))
        '2023-11-14T22:13:20.000000Z'
    """
    ns = record.scored_end_ns or record.start_ns
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

    async def send(self, session: aiohttp.ClientSession, record: ScoreRecord) -> Answer:
        """Create or update the score."""
        status, text = await request(session, self.name, "POST", self.url, json=score_body(record),
                                     auth=self._auth)
        return answer_of(self.name, status, text, record)
