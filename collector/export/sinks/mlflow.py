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

A conversation score (SPEC §7) is an assessment on the session's first trace, as MLflow's own
session scoring logs it: no span, metadata ``mlflow.trace.session`` = the key as the spans carry
it, so ``search_traces(filter_string="feedback.NAME < 0.5")`` finds every trace of the session.
Its id comes from the session, scorer and version and that first trace (MLflow's assessment ids
are unique across traces): a revision is a new outcome of the same assessment, put into it in
place, unless the assessment already holds a later revision (a revision never goes back).
Then, as MLflow's own re-scoring does, the session's other assessments by the same
scorer, version and name on that trace are deleted (and, when the assessment was just created for a
later revision, on the session's other traces: its first trace changed), so each (session,
scorer) has exactly one current assessment.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import aiohttp

from collector.common.types import ScoreRecord
from collector.config import MlflowSinkConfig, secret_value
from collector.export.send.answers import Answer, Verdict
from collector.export.sinks.base import (
    answer_of,
    holds_later_revision,
    key_digest,
    request,
    score_metadata,
    session_digest,
    session_of,
)

logger = logging.getLogger(__name__)

API = "/api/3.0/mlflow/traces"
SESSION_KEY = "mlflow.trace.session"
"""The trace metadata (and session assessment metadata) naming a trace's session in MLflow."""


def trace_id(record: ScoreRecord) -> str:
    """MLflow's id of the trace the assessment is on: the scored trace, or a session's first.

    Example:
        >>> trace_id(ScoreRecord("k", "ab" * 16, "s", "x", "q", "Q"))
        'tr-abababababababababababababababab'
        >>> from collector.common.session_types import SessionScore
        >>> trace_id(ScoreRecord("k", "ab" * 16, "s", "x", "q", "Q",
        ...                      session=SessionScore("bot/c1", "c1", first_trace_id="01" * 16).to_dict()))
        'tr-01010101010101010101010101010101'
    """
    session = session_of(record)
    return f"tr-{session.first_trace_id if session else record.trace_id}"


def assessment_id(record: ScoreRecord) -> str:
    """The assessment's id, from the score's key, or a conversation score's session, scorer,
    version and first trace (MLflow's own ids are ``a-`` + 32 hex digits).

    Example:
        >>> assessment_id(ScoreRecord("t/s/q/1", "t", "s", "x", "q", "Q")).startswith("a-")
        True
    """
    session = session_of(record)
    if session is None:
        return f"a-{key_digest(record, 'mlflow')}"
    return f"a-{session_digest(record, 'mlflow', session.first_trace_id)}"


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
    session = session_of(record)
    if session is not None:  # the whole session's, not a span's
        del body["span_id"]
        body["metadata"][SESSION_KEY] = session.session_id
    if record.reason is not None:
        body["rationale"] = record.reason
    return body


UPDATED_FIELDS = "assessmentName,feedback,rationale,metadata"
"""What a new outcome replaces in an existing assessment (MLflow keeps its source and span): a
protobuf ``FieldMask`` in its JSON form, camelCase (``assessment_name`` fails the parse, which
MLflow's server then ignores: the update answers 200 and changes nothing)."""


def held_metadata(reply: str) -> dict[str, Any]:
    """The metadata of an existing assessment (empty when it has none, or the reply is not an
    assessment).

    Example:
        >>> held_metadata('{"assessment": {"metadata": {"revision": "2"}}}'), held_metadata("<html>")
        ({'revision': '2'}, {})
    """
    try:
        metadata = json.loads(reply).get("assessment", {}).get("metadata") or {}
    except (ValueError, AttributeError):
        return {}
    return metadata if isinstance(metadata, dict) else {}


def held_outcome(reply: str) -> str | None:
    """The evaluation span id an existing assessment's metadata names (None when it names none,
    or the reply is not an assessment).

    Example:
        >>> held_outcome('{"assessment": {"metadata": {"evaluation_span_id": "abababababababab"}}}')
        'abababababababab'
        >>> held_outcome('{"assessment": {}}'), held_outcome("<html>")
        (None, None)
    """
    found = held_metadata(reply).get("evaluation_span_id")
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


def stale_assessments(reply: str, record: ScoreRecord) -> list[str]:
    """The ids of the assessments in a trace (a ``GET .../traces/{id}`` reply) that a conversation
    score replaces: by the same scorer and version, of the same name and session, under another id
    (an earlier revision, scored when the session's first trace was another one). Another version's
    assessment stays, as a run's does (each version is its own score in every destination).

    Example:
        >>> from collector.common.session_types import SessionScore
        >>> rec = ScoreRecord("k", "ab" * 16, "s", "x", "q", "Goal", "2", score=1.0,
        ...                   session=SessionScore("bot/c1", "c1", first_trace_id="ab" * 16).to_dict())
        >>> def item(aid, session="c1", name="Goal", source="q", version="2"):
        ...     return {"assessment_id": aid, "assessment_name": name, "source": {"source_id": source},
        ...             "metadata": {"mlflow.trace.session": session, "scorer_version": version}}
        >>> found = [item("a-old"), item(assessment_id(rec)), item("a-2", session="c2"), item("a-3", name="Other"),
        ...          item("a-4", source="someone"), item("a-5", version="1")]
        >>> stale_assessments(json.dumps({"trace": {"trace_info": {"assessments": found}}}), rec)
        ['a-old']
    """
    session = session_of(record)
    try:
        found = json.loads(reply)["trace"]["trace_info"].get("assessments") or []
    except (ValueError, KeyError, TypeError, AttributeError):
        return []
    if session is None or not isinstance(found, list):
        return []
    current = assessment_id(record)
    return [str(a["assessment_id"]) for a in found
            if isinstance(a, dict) and a.get("assessment_id") not in (None, current)
            and a.get("assessment_name") == record.scorer_name
            and (a.get("metadata") or {}).get(SESSION_KEY) == session.session_id
            and (a.get("metadata") or {}).get("scorer_version") == record.scorer_version
            and (a.get("source") or {}).get("source_id") == record.scorer_id]


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
        not have the trace yet), unless that one holds a later revision of the conversation; for a
        conversation score, then delete what it replaces."""
        url = f"{self.base}/{trace_id(record)}/assessments"
        existing = f"{url}/{assessment_id(record)}"
        status, text = await request(session, self.name, "GET", existing, headers=self._headers, limit=None)
        created = False
        found = answer_of(status, text)
        if status == 200:
            answer = Answer.sent()  # sent before (a redelivery, a replica, a second backfill)
            if holds_later_revision(record, held_metadata(text)):  # a revision never goes back
                logger.info("mlflow keeps a later revision of session score %s: revision %s not sent",
                            record.key, (record.session or {}).get("revision"))
                return answer
            if held_outcome(text) != record.score_span_id:
                status, text = await request(session, self.name, "PATCH", existing, json=update(record),
                                             headers=self._headers)
                answer = answer_of(status, text)
        elif found.verdict is not Verdict.WAIT:  # an outage, or a refusal: the same answer a POST would get
            return found
        else:  # no such assessment (or trace) yet
            status, text = await request(session, self.name, "POST", url,
                                         json={"assessment": assessment(record)}, headers=self._headers)
            answer, created = answer_of(status, text), True
        if record.session is None or answer.verdict is not Verdict.SENT:
            return answer
        return await self._remove_stale(session, record, created)

    async def _remove_stale(self, session: aiohttp.ClientSession, record: ScoreRecord, created: bool) -> Answer:
        """Delete what earlier revisions or versions of a conversation score left (`stale_assessments`)
        on its first trace, and on the session's other traces when its assessment was just created for
        a later revision; RETRY when MLflow is away (the score is sent again, which changes nothing)."""
        scored = session_of(record)
        if scored is None:
            return Answer.sent()
        traces = [scored.first_trace_id]
        if created and scored.revision > 1:
            traces += scored.trace_ids
        for trace in dict.fromkeys(traces):
            status, text = await request(session, self.name, "GET", f"{self.base}/tr-{trace}",
                                         headers=self._headers, limit=None)
            if status != 200:
                if (answer := answer_of(status, text)).verdict.keeps:
                    return answer
                continue  # a trace MLflow does not have holds nothing to delete
            for stale in stale_assessments(text, record):
                status, text = await request(session, self.name, "DELETE",
                                             f"{self.base}/tr-{trace}/assessments/{stale}", headers=self._headers)
                if (answer := answer_of(status, text)).verdict.keeps:
                    return answer
        return Answer.sent()
