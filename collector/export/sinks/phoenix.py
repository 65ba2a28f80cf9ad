"""``[sinks.phoenix]``: each score as a Phoenix span annotation on the scored span.

``POST /v1/span_annotations?sync=true`` (``sync`` makes Phoenix answer 404 for a span it
does not know yet, instead of retrying the insert in the background and answering 200):
name = the scorer's name, ``annotator_kind`` LLM for judge scorers else CODE, result
{score, label, explanation}, metadata {scorer id and version, run id, judge model, cost}.
Phoenix keeps one annotation per (name, span, identifier): the identifier comes from the
score's key, so sending a score again, or a new outcome of it, updates its annotation
(whose metadata names the evaluation span of the outcome it holds).

A conversation score (SPEC §7) is a session annotation instead
(``POST /v1/session_annotations?sync=true``) on the session as the spans name it, with the
same name, kind, result and identifier: Phoenix keeps one per (name, session, identifier), so a
revision of the session's score updates it in place (its metadata names the revision, the
turns and the evaluation span). A session Phoenix does not know yet is answered 404, like an
unknown span. Before it is written, the session's annotations are read (GraphQL
``getProjectSessionById``: the REST listing needs the project, which a score does not name): an
annotation holding a later revision is kept (a revision never goes back:
an earlier one retried late, or a backfill's).

Phoenix keeps the first copy of a span, so a new outcome is a new evaluation span
(`collector.common.ids`), and the span it replaces (``record.supersedes``) is marked with a
`superseded` annotation: ``annotations['superseded'].label == 'superseded'`` finds the
evaluation spans that are no longer current. That span may never have reached Phoenix (a
failure replayed before its span was exported), so the mark is posted without ``sync``:
Phoenix inserts it when the span arrives, or gives up after a while, and never fails the score.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import aiohttp

from collector.common.types import ScoreRecord
from collector.config import PhoenixSinkConfig, secret_value
from collector.export.send.answers import Answer, Verdict
from collector.export.sinks.base import (
    answer_of,
    holds_later_revision,
    request,
    score_metadata,
    session_of,
)

logger = logging.getLogger(__name__)

SESSION_ANNOTATIONS = ("query ($id: String!) { getProjectSessionById(sessionId: $id) "
                       "{ sessionAnnotations { name identifier metadata } } }")
"""The GraphQL query of a session's annotations (with the metadata of the revision each holds)."""


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


def session_annotation(record: ScoreRecord) -> dict[str, Any]:
    """The ``SessionAnnotationData`` of a conversation score: `annotation`'s fields on the session.

    Example:
        >>> from collector.common.session_types import SessionScore
        >>> a = session_annotation(ScoreRecord("k", "ab" * 16, "cd" * 8, "ef" * 8, "q", "Goal met", "1", score=0.2,
        ...                                    session=SessionScore("bot/c1", "c1", turns=3, revision=2).to_dict()))
        >>> (a["session_id"], a["name"], a["identifier"], a["metadata"]["revision"], "span_id" in a)
        ('c1', 'Goal met', 'tracescore:q:1', '2', False)
    """
    session = session_of(record)
    if session is None:
        raise ValueError(f"score {record.key} is not a conversation score")
    body = annotation(record)
    del body["span_id"]
    return {"session_id": session.session_id, **body}


def held_session_metadata(reply: str, record: ScoreRecord) -> dict[str, Any] | None:
    """The metadata of the session annotation ``record`` would replace, from a `SESSION_ANNOTATIONS`
    reply (None when there is none, or the reply says nothing usable).

    Example:
        >>> rec = ScoreRecord("k", "t", "s", "x", "q", "Goal met", "1")
        >>> reply = {"data": {"getProjectSessionById": {"sessionAnnotations": [
        ...     {"name": "Goal met", "identifier": "tracescore:q:1", "metadata": {"revision": "2"}},
        ...     {"name": "Goal met", "identifier": "someone", "metadata": {"revision": "9"}}]}}}
        >>> held_session_metadata(json.dumps(reply), rec), held_session_metadata("<html>", rec)
        ({'revision': '2'}, None)
    """
    try:
        found = json.loads(reply)["data"]["getProjectSessionById"] or {}
        annotations = found.get("sessionAnnotations") or []
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    for held in annotations:
        if isinstance(held, dict) and held.get("name") == record.scorer_name \
                and held.get("identifier") == identifier(record) and isinstance(held.get("metadata"), dict):
            return dict(held["metadata"])
    return None


SUPERSEDED = "superseded"
"""The name (and label) of the annotation that marks an evaluation span no longer current."""


def superseded_mark(record: ScoreRecord) -> dict[str, Any] | None:
    """The ``SpanAnnotationData`` marking the evaluation span ``record`` replaces (None when it
    replaces none): on that span, naming the span that holds the current outcome.

    Example:
        >>> mark = superseded_mark(ScoreRecord("k", "ab" * 16, "cd" * 8, "ef" * 8, "q", "Quality", score=1.0,
        ...                                    supersedes="12" * 8))
        >>> (mark["span_id"], mark["name"], mark["result"]["label"], mark["metadata"]["superseded_by"])
        ('1212121212121212', 'superseded', 'superseded', 'efefefefefefefef')
        >>> superseded_mark(ScoreRecord("k", "ab" * 16, "cd" * 8, "ef" * 8, "q", "Quality", score=1.0)) is None
        True
    """
    if record.supersedes is None:
        return None
    return {
        "span_id": record.supersedes,
        "name": SUPERSEDED,
        "annotator_kind": "CODE",
        "identifier": identifier(record),
        "result": {"label": SUPERSEDED,
                   "explanation": f"replaced by evaluation span {record.score_span_id}"},
        "metadata": {"superseded_by": record.score_span_id, "scorer_id": record.scorer_id,
                     "scorer_version": record.scorer_version or ""},
    }


class PhoenixSink:
    """Phoenix's span annotations API.

    Example:
        >>> sink = PhoenixSink(PhoenixSinkConfig(endpoint="http://127.0.0.1:6006"))
        >>> sink.url, sink.mark_url
        ('http://127.0.0.1:6006/v1/span_annotations?sync=true', 'http://127.0.0.1:6006/v1/span_annotations')
        >>> sink.session_url
        'http://127.0.0.1:6006/v1/session_annotations?sync=true'
    """

    name = "phoenix"

    def __init__(self, cfg: PhoenixSinkConfig) -> None:
        self.url = f"{cfg.url()}/v1/span_annotations?sync=true"
        self.mark_url = f"{cfg.url()}/v1/span_annotations"
        self.session_url = f"{cfg.url()}/v1/session_annotations?sync=true"
        self.graphql_url = f"{cfg.url()}/graphql"
        key = secret_value(cfg.api_key, "sinks.phoenix.api_key")
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}

    async def send(self, session: aiohttp.ClientSession, record: ScoreRecord) -> Answer:
        """Create or update the score's annotation, a session annotation for a conversation score
        (404: Phoenix does not have the span or session yet; kept when it holds a later revision),
        then mark the evaluation span it supersedes, if any (both are sent again when Phoenix is
        down)."""
        if record.session is None:
            url, body = self.url, annotation(record)
        else:
            url, body = self.session_url, session_annotation(record)
            later = await self._holds_later_revision(session, record)
            if later is not None:
                return later
        status, text = await request(session, self.name, "POST", url, json={"data": [body]}, headers=self._headers)
        answer = answer_of(status, text)
        mark = superseded_mark(record)
        if answer.verdict is not Verdict.SENT or mark is None:
            return answer
        status, text = await request(session, self.name, "POST", self.mark_url,
                                     json={"data": [mark]}, headers=self._headers)
        # The score is in: only an outage (or a hold) sends both again; a refused mark is logged, not retried.
        marked = answer_of(status, text)
        if marked.verdict is Verdict.REFUSE:
            logger.error("phoenix sink: the mark on superseded evaluation span %s was refused (%s)",
                         record.supersedes, marked.cause)
        return marked if marked.verdict.keeps else Answer.sent()

    async def _holds_later_revision(self, session: aiohttp.ClientSession, record: ScoreRecord) -> Answer | None:
        """SENT when the session's annotation holds a later revision (``record`` is not written),
        the read's RETRY when Phoenix is away (no answer, 429, 5xx: `Verdict.RETRY`); None: write it
        (any other answer, a refusal of the read or a hold included, does not hold a score back: the
        write answers for itself)."""
        scored = session_of(record)
        variables = {"id": scored.session_id if scored else ""}
        status, text = await request(session, self.name, "POST", self.graphql_url, limit=None, headers=self._headers,
                                     json={"query": SESSION_ANNOTATIONS, "variables": variables})
        read = answer_of(status, text)
        if read.verdict is Verdict.RETRY:
            return read  # Phoenix is away: said as a write's would be
        if status == 200 and holds_later_revision(record, held_session_metadata(text, record)):
            logger.info("phoenix keeps a later revision of session score %s: revision %s not sent",
                        record.key, scored.revision if scored else "?")
            return Answer.sent()
        return None
