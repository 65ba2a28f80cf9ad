"""``[sinks.phoenix]``: each score as a Phoenix span annotation on the scored span.

``POST /v1/span_annotations?sync=true`` (``sync`` makes Phoenix answer 404 for a span it
does not know yet, instead of retrying the insert in the background and answering 200):
name = the scorer's name, ``annotator_kind`` LLM for judge scorers else CODE, result
{score, label, explanation}, metadata {scorer id and version, run id, judge model, cost}.
Phoenix keeps one annotation per (name, span, identifier): the identifier comes from the
score's key, so sending a score again updates its annotation.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from collector.config import PhoenixSinkConfig, secret_value
from collector.export.sinks.base import Answer, answer_of, request, score_metadata
from collector.types import ScoreRecord


def identifier(record: ScoreRecord) -> str:
    """The annotation's identifier: the scorer id and version (with the span and the name, the
    score's key).

    Example:
        >>> identifier(ScoreRecord("k", "t", "s", "x", "relevance", "Relevance", scorer_version="2"))
        'tracescore:relevance:2'
    """
    return f"tracescore:{record.scorer_id}:{record.scorer_version or ''}"


def annotation(record: ScoreRecord) -> dict[str, Any]:
    """The ``SpanAnnotationData`` of one score.

    Example:
        >>> a = annotation(ScoreRecord("k", "ab" * 16, "cd" * 8, "ef" * 8, "q", "Quality", score=0.2,
        ...                            label="fail", reason="off topic", llm_judged=True))
        >>> (a["span_id"], a["name"], a["annotator_kind"], a["result"])
        ('cdcdcdcdcdcdcdcd', 'Quality', 'LLM', {'score': 0.2, 'label': 'fail', 'explanation': 'off topic'})
    """
    result = {"score": record.score, "label": record.label, "explanation": record.reason}
    return {
        "span_id": record.span_id,
        "name": record.scorer_name,
        "annotator_kind": "LLM" if record.llm_judged else "CODE",
        "identifier": identifier(record),
        "result": {k: v for k, v in result.items() if v is not None},
        "metadata": score_metadata(record),
    }


class PhoenixSink:
    """Phoenix's span annotations API.

    Example:
        >>> PhoenixSink(PhoenixSinkConfig(endpoint="http://127.0.0.1:6006")).url
        'http://127.0.0.1:6006/v1/span_annotations?sync=true'
    """

    name = "phoenix"

    def __init__(self, cfg: PhoenixSinkConfig) -> None:
        self.url = f"{cfg.url()}/v1/span_annotations?sync=true"
        key = secret_value(cfg.api_key, "sinks.phoenix.api_key")
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}

    async def send(self, session: aiohttp.ClientSession, record: ScoreRecord) -> Answer:
        """Create or update the score's annotation (404: Phoenix does not have the span yet)."""
        status, text = await request(session, self.name, "POST", self.url,
                                     json={"data": [annotation(record)]}, headers=self._headers)
        return answer_of(self.name, status, text, record)
