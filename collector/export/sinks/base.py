"""What every native score sink shares: the answer a backend gave, the client protocol, ids
derived from the score key, and the HTTP plumbing.

A sink client turns one `collector.common.types.ScoreRecord` into its backend's score object and
says how the backend answered (`collector.export.send.answers.Answer`, read as every sender
reads it, a 404 meaning the span or trace is not there yet: ``WAIT``, retried until
``span_wait_s``). `collector.export.sinks.sender` does the rest (the shared send loop over
the sink's outbox: backoff, holds, metrics). Every id sent is derived from the score's key,
so a second send of one score updates it (or finds it) and never makes a second one, and a
new outcome of the score (a replayed dead letter, a run scored again to another value)
replaces the old one in place. A conversation score (``ScoreRecord.session``, SPEC §7) is
the session's: its ids come from the session, the scorer and its version (`session_digest`),
never from the revision, so each revision replaces the previous one, and never an earlier
one a later: a sink that can read what it holds first keeps a later revision
(`holds_later_revision`).
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Mapping
from typing import Any, Protocol

import aiohttp

from collector.common.session_types import SessionScore
from collector.common.types import ScoreRecord
from collector.export.send.answers import Answer, Verdict, classify_http, describe_error

logger = logging.getLogger(__name__)


class SinkClient(Protocol):
    """One backend's score API."""

    name: str

    async def send(self, session: aiohttp.ClientSession, record: ScoreRecord) -> Answer:
        """Send one score; never raises for an HTTP or network failure (it answers ``RETRY``)."""
        ...


def key_digest(record: ScoreRecord, namespace: str) -> str:
    """32 hex digits derived from the score's key (trace, span, scorer id, version) and a
    per-backend namespace: the id a backend stores the score under.

    Example:
        >>> rec = ScoreRecord("t/s/q/1", "ab" * 16, "cd" * 8, "ef" * 8, "q", "Q")
        >>> key_digest(rec, "mlflow") == key_digest(rec, "mlflow"), key_digest(rec, "mlflow") == key_digest(rec, "langfuse")
        (True, False)
    """
    return hashlib.sha256(f"tracescore:{namespace}:{record.key}".encode()).hexdigest()[:32]


def session_of(record: ScoreRecord) -> SessionScore | None:
    """The session a conversation score scored (None for a run's score).

    Example:
        >>> rec = ScoreRecord("k", "t", "s", "x", "q", "Q", session=SessionScore("bot/c1", "c1", turns=3).to_dict())
        >>> session_of(rec).turns, session_of(ScoreRecord("k", "t", "s", "x", "q", "Q"))
        (3, None)
    """
    return None if record.session is None else SessionScore.from_dict(record.session)


def session_digest(record: ScoreRecord, namespace: str, *extra: str) -> str:
    """32 hex digits derived from a conversation score's session scope, scorer id and version (and
    ``extra``), and a per-backend namespace: the id a backend stores a session's score under, the
    same for every revision, so a revision replaces the previous one.

    Example:
        >>> def rec(revision): return ScoreRecord(f"session/bot/c1/{revision}/q/1", "t", "s", "x", "q", "Q", "1",
        ...     session=SessionScore("bot/c1", "c1", revision=revision).to_dict())
        >>> session_digest(rec(1), "langfuse") == session_digest(rec(2), "langfuse") != key_digest(rec(1), "langfuse")
        True
        >>> session_digest(rec(1), "mlflow", "ab" * 16) == session_digest(rec(1), "mlflow", "cd" * 16)
        False
    """
    session = session_of(record)
    if session is None:
        raise ValueError(f"score {record.key} is not a conversation score")
    name = "/".join(["session", session.scope, record.scorer_id, record.scorer_version or "", *extra])
    return hashlib.sha256(f"tracescore:{namespace}:{name}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


def key_uuid(record: ScoreRecord, namespace: str) -> str:
    """`key_digest` as a UUID string.

    Example:
        >>> len(key_uuid(ScoreRecord("t/s/q/1", "ab" * 16, "cd" * 8, "ef" * 8, "q", "Q"), "langfuse"))
        36
    """
    return str(uuid.UUID(key_digest(record, namespace)))


def score_metadata(record: ScoreRecord) -> dict[str, str]:
    """What every sink keeps beside the value: scorer id and version, run id, label, judge model,
    cost, and the evaluation span of the outcome it holds (``evaluation_span_id``: a new outcome
    of the same score updates the object, which then names the new span); for a conversation
    score, the session's ``revision``, ``turns`` and ``partial`` (when it is) (strings: MLflow
    keeps only string metadata; the others take them as they are).

    Example:
        >>> score_metadata(ScoreRecord("k", "t", "s", "x", "q", "Q", scorer_version="2", run_id="r", cost_usd=0.5))
        {'scorer_id': 'q', 'scorer_version': '2', 'run_id': 'r', 'cost_usd': '0.5', 'evaluation_span_id': 'x'}
        >>> session = SessionScore("bot/c1", "c1", turns=3, revision=2).to_dict()
        >>> meta = score_metadata(ScoreRecord("k", "t", "s", "x", "q", "Q", session=session))
        >>> meta["revision"], meta["turns"], "partial" in meta
        ('2', '3', False)
    """
    meta = {
        "scorer_id": record.scorer_id,
        "scorer_version": record.scorer_version,
        "run_id": record.run_id,
        "label": record.label,
        "judge_model": ",".join(record.judge_models) or None,
        "cost_usd": None if record.cost_usd is None else repr(record.cost_usd),
        "evaluation_span_id": record.score_span_id,
    }
    session = session_of(record)
    if session is not None:  # which revision of the session the object holds
        meta.update({"revision": str(session.revision), "turns": str(session.turns),
                     "partial": "true" if session.partial else None})
    return {k: v for k, v in meta.items() if v}


def holds_later_revision(record: ScoreRecord, held: Mapping[str, Any] | None) -> bool:
    """Whether a backend's session score whose metadata is ``held`` (`score_metadata` as stored)
    holds a later revision than the one ``record`` scored: then ``record`` (an earlier revision
    retried late, or a backfill's) must not replace it, since a revision never goes back.

    Example:
        >>> def rec(revision): return ScoreRecord("k", "t", "s", "x", "q", "Q",
        ...                                       session=SessionScore("bot/c1", "c1", revision=revision).to_dict())
        >>> held = score_metadata(rec(2))
        >>> holds_later_revision(rec(1), held), holds_later_revision(rec(2), held), holds_later_revision(rec(3), held)
        (True, False, False)
        >>> holds_later_revision(rec(1), None), holds_later_revision(rec(1), {"revision": "?"})
        (False, False)
    """
    session = session_of(record)
    if session is None or not held:
        return False
    try:
        return int(str(held.get("revision"))) > session.revision
    except ValueError:
        return False


async def request(
    session: aiohttp.ClientSession, sink: str, method: str, url: str, *, limit: int | None = 500, **options: Any,
) -> tuple[int, str]:
    """One HTTP request; the status and the first ``limit`` characters of the reply (all of it
    for None; 0: no answer)."""
    try:
        async with session.request(method, url, **options) as resp:
            text = await resp.text(errors="replace")
            return resp.status, text[:limit]
    except (aiohttp.ClientError, TimeoutError, OSError) as err:
        logger.debug("%s sink: %s %s failed: %s", sink, method, url, err)
        return 0, describe_error(err)


def answer_of(status: int, text: str) -> Answer:
    """Read a score API's reply (`collector.export.send.answers.classify_http`): a 404 that
    carries the backend's message says it does not know the span, trace or session yet
    (``WAIT``), any other answer reads as for every sender (401/403 held for a credentials fix,
    an outage retried, a malformed score refused for good).

    Example:
        >>> [answer_of(s, t).verdict.value for s, t in ((200, ""), (404, "Spans with IDs ab do not exist."),
        ...                                               (404, "<title>404 Not Found</title>"), (401, ""), (400, "bad"))]
        ['sent', 'wait', 'hold', 'hold', 'refuse']
    """
    return classify_http(status, text, not_found=Verdict.WAIT)
