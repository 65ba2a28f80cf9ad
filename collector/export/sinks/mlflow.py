"""``[sinks.mlflow]``: each score as an MLflow assessment (feedback) on the trace.

The trace is ``tr-<OTel trace id in hex>`` (how MLflow names traces it received over
OTLP). Feedback: name = the scorer's name, span id = the scored span, source LLM_JUDGE or
CODE with the scorer id, value = the score, rationale = the reason, label and scorer
version in metadata (strings). The assessment id is derived from the score's key; MLflow
answers 500 to a second POST of one id, so the sink first asks whether it exists
(``GET .../assessments/{id}``) and only creates what is missing.
"""

from __future__ import annotations

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
        """Create the assessment unless it exists (404: MLflow does not have the trace yet)."""
        url = f"{self.base}/{trace_id(record)}/assessments"
        status, text = await request(session, self.name, "GET", f"{url}/{assessment_id(record)}",
                                     headers=self._headers)
        if status == 200:
            return Answer.SENT  # sent before (a redelivery, a replica, a second backfill)
        if status != 404:  # an outage, or a refusal: the same answer a POST would get
            return answer_of(self.name, status, text, record)
        status, text = await request(session, self.name, "POST", url,
                                     json={"assessment": assessment(record)}, headers=self._headers)
        return answer_of(self.name, status, text, record)
