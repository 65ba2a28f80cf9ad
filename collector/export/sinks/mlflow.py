"""``[sinks.mlflow]``: each score as an MLflow assessment (feedback) on the trace.

The trace is ``tr-<OTel trace id in hex>`` (how MLflow names traces it received over
OTLP). Feedback: name = the scorer's name, span id = the scored span, source LLM_JUDGE or
CODE with the scorer id, value = the score, rationale = the reason, label and scorer
version in metadata (strings). The assessment id is derived from the score's key; MLflow
answers 500 to a second POST of one id, so the sink first asks whether it exists
(``GET .../assessments/{id}``) and only creates what is missing. One that exists holds the
outcome its metadata names (``evaluation_span_id``): the same outcome is left as it is, a new
one (a run scored again to another value) replaces its value, rationale and metadata in place
(``PATCH``), so the trace keeps one assessment per score.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from collector.config import MlflowSinkConfig, secret_value
from collector.export.sinks.base import Answer, answer_of, key_digest, request, score_metadata
from collector.types import ScoreRecord

API = "/api/3.0/mlflow/traces"


def trace_id(record: ScoreRecord) -> str:
    """MLflow's id of the scored trace.

    Example:
        >>> trace_id(ScoreRecord("k", "ab" * 16, "s", "x", "q", "Q"))
        'tr-abababababababababababababababab'
    """
    return f"tr-{record.trace_id}"


def assessment_id(record: ScoreRecord) -> str:
    """The assessment's id, from the score's key (MLflow's own ids are ``a-`` + 32 hex digits).

    Example:
        >>> assessment_id(ScoreRecord("t/s/q/1", "t", "s", "x", "q", "Q")).startswith("a-")
        True
    """
    return f"a-{key_digest(record, 'mlflow')}"


def assessment(record: ScoreRecord) -> dict[str, Any]:
    """The ``Assessment`` of one score (feedback).

    Example:
        >>> a = assessment(ScoreRecord("k", "ab" * 16, "cd" * 8, "x", "q", "Quality", score=0.2, reason="off"))
        >>> (a["assessment_name"], a["span_id"], a["source"], a["feedback"], a["rationale"])
        ('Quality', 'cdcdcdcdcdcdcdcd', {'source_type': 'CODE', 'source_id': 'q'}, {'value': 0.2}, 'off')
    """
    body: dict[str, Any] = {
        "assessment_id": assessment_id(record),
        "assessment_name": record.scorer_name,
        "trace_id": trace_id(record),
        "span_id": record.span_id,
        "source": {"source_type": "LLM_JUDGE" if record.llm_judged else "CODE", "source_id": record.scorer_id},
        "feedback": {"value": record.score},
        "metadata": score_metadata(record),
    }
    if record.reason is not None:
        body["rationale"] = record.reason
    return body


UPDATED_FIELDS = "assessmentName,feedback,rationale,metadata"
"""What a new outcome replaces in an existing assessment (MLflow keeps its source and span): a
protobuf ``FieldMask`` in its JSON form, camelCase (``assessment_name`` fails the parse, which
MLflow's server then ignores: the update answers 200 and changes nothing)."""


def held_outcome(reply: str) -> str | None:
    """The evaluation span id an existing assessment's metadata names (None when it names none,
    or the reply is not an assessment).

    Example:
        >>> held_outcome('{"assessment": {"metadata": {"evaluation_span_id": "abababababababab"}}}')
        'abababababababab'
        >>> held_outcome('{"assessment": {}}'), held_outcome("<html>")
        (None, None)
    """
    try:
        metadata = json.loads(reply).get("assessment", {}).get("metadata") or {}
    except (ValueError, AttributeError):
        return None
    found = metadata.get("evaluation_span_id") if isinstance(metadata, dict) else None
    return None if found is None else str(found)


def update(record: ScoreRecord) -> dict[str, Any]:
    """The ``UpdateAssessment`` body that puts a new outcome into the score's assessment (a
    rationale the new outcome lacks is emptied, not kept).

    Example:
        >>> body = update(ScoreRecord("k", "ab" * 16, "cd" * 8, "ef" * 8, "q", "Quality", score=0.8))
        >>> body["update_mask"], body["assessment"]["feedback"], body["assessment"]["rationale"]
        ('assessmentName,feedback,rationale,metadata', {'value': 0.8}, '')
    """
    return {"assessment": {"rationale": "", **assessment(record)}, "update_mask": UPDATED_FIELDS}


class MlflowSink:
    """MLflow's assessments API on a tracking server.

    Example:
        >>> MlflowSink(MlflowSinkConfig(tracking_uri="http://127.0.0.1:5000")).base
        'http://127.0.0.1:5000/api/3.0/mlflow/traces'
    """

    name = "mlflow"

    def __init__(self, cfg: MlflowSinkConfig) -> None:
        self.base = f"{cfg.url()}{API}"
        token = secret_value(cfg.token, "sinks.mlflow.token")
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def send(self, session: aiohttp.ClientSession, record: ScoreRecord) -> Answer:
        """Create the assessment, or put a new outcome into the one that exists (404: MLflow does
        not have the trace yet)."""
        url = f"{self.base}/{trace_id(record)}/assessments"
        existing = f"{url}/{assessment_id(record)}"
        status, text = await request(session, self.name, "GET", existing, headers=self._headers, limit=None)
        if status == 200:
            if held_outcome(text) == record.score_span_id:
                return Answer.SENT  # sent before (a redelivery, a replica, a second backfill)
            status, text = await request(session, self.name, "PATCH", existing, json=update(record),
                                         headers=self._headers)
            return answer_of(self.name, status, text, record)
        if status != 404:  # an outage, or a refusal: the same answer a POST would get
            return answer_of(self.name, status, text, record)
        status, text = await request(session, self.name, "POST", url,
                                     json={"assessment": assessment(record)}, headers=self._headers)
        return answer_of(self.name, status, text, record)
