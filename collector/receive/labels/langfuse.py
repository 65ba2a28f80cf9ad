"""People's labels in Langfuse: scores with ``source = ANNOTATION`` (a person in the UI or an
annotation queue), in the project the ``[sinks.langfuse]`` keys name.

``GET /api/public/v3/scores?source=ANNOTATION&fromTimestamp=...&fields=details,subject,annotation``
(100 a page, paged by ``meta.cursor``; Langfuse 3.179 and later), or, where that answers 404, the
deprecated page-numbered ``GET /api/public/v2/scores`` with the same filters. tracescore's own
scores are written through the API (``source = API``) and Langfuse's own judges' are ``EVAL``:
neither is read. The filter on time is on the score's ``timestamp`` (when it was given); an
edit changes ``updatedAt`` only, so a pull sweeps every person's score given in the last
``since_s`` seconds and hands on those given or changed since the cursor
(`collector.receive.labels.sweep`): an edit is read by the next pull as long as the score was
first given within ``since``. People's scores are few, so a pull costs one request per 100 of
them. Langfuse's read API may show a score about 10 minutes late; the cursor's 30-minute
look-back covers it.

What a score is about (v3 ``subject``, v2 ``observationId``/``traceId``/``sessionId``): an
observation -> a run label on that span (trace id = its ``traceId``), a trace -> a label on the
whole trace, a session -> a conversation label; a dataset run's score is not a label. Every
scorer name is read (the caller counts the ones it does not know). value = the typed ``value``
(v2: ``stringValue`` for categories and text, a boolean for BOOLEAN); rationale = ``comment``;
annotator = ``authorUserId``; ``at`` = ``updatedAt``; ``source_id`` = the score id.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from collector.common.errors import PullError
from collector.common.labels import Label
from collector.config import SinksConfig
from collector.receive.labels.reader import BackendReader
from collector.receive.labels.sweep import Sweep, epoch_s, iso_time
from collector.receive.pull import JsonClient, Retry
from collector.receive.pull.client import expect

PER_REQUEST = 100
FIELDS = "details,subject,annotation"


def score_value(row: Mapping[str, Any]) -> float | bool | str | None:
    """A score's value as the person gave it (v3's typed ``value``, or v2's pair).

    Example:
        >>> score_value({"dataType": "BOOLEAN", "value": True}), score_value({"dataType": "NUMERIC", "value": 3})
        (True, 3.0)
        >>> score_value({"dataType": "BOOLEAN", "value": 0, "stringValue": "False"})  # v2
        False
        >>> score_value({"dataType": "CATEGORICAL", "value": 1, "stringValue": "good"})  # v2
        'good'
    """
    kind, value = row.get("dataType"), row.get("value")
    if kind == "BOOLEAN":
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, float)):
            return value == 1
    elif kind == "NUMERIC":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif kind in ("CATEGORICAL", "TEXT", "CORRECTION"):
        text = row.get("stringValue", value)
        if isinstance(text, str):
            return text
    raise ValueError(f"a {kind} score with the value {value!r}")


def score_label(row: Mapping[str, Any]) -> list[Label]:
    """The label a person's score is (none for another source's, or a dataset run's).

    Example:
        >>> row = {"id": "s-1", "name": "Q", "source": "ANNOTATION", "dataType": "BOOLEAN", "value": False,
        ...        "comment": "wrong", "authorUserId": "u-7", "updatedAt": "2026-12-06T06:04:37.120Z",
        ...        "subject": {"kind": "observation", "id": "cd" * 8, "traceId": "ab" * 16}}
        >>> [(x.item, x.trace_id[:4], x.value, x.rationale, x.annotator) for x in score_label(row)]
        [('span:cdcdcdcdcdcdcdcd', 'abab', False, 'wrong', 'u-7')]
        >>> [x.item for x in score_label({**row, "subject": {"kind": "session", "id": "chat-1"}})]
        ['session:chat-1']
        >>> score_label({**row, "source": "API"}), score_label({**row, "subject": {"kind": "experiment", "id": "r"}})
        ([], [])
    """
    if row["source"] != "ANNOTATION":
        return []
    subject = row.get("subject")
    if isinstance(subject, Mapping):
        kind, ident = subject["kind"], str(subject["id"])
        trace_id = str(subject.get("traceId") or "") if kind == "observation" else ident if kind == "trace" else ""
    elif row.get("sessionId"):
        kind, ident, trace_id = "session", str(row["sessionId"]), ""
    elif row.get("observationId"):
        kind, ident, trace_id = "observation", str(row["observationId"]), str(row.get("traceId") or "")
    elif row.get("traceId"):
        kind, ident = "trace", str(row["traceId"])
        trace_id = ident
    elif row.get("datasetRunId"):
        kind, ident, trace_id = "experiment", "", ""
    else:
        raise ValueError("a score about nothing (no subject, trace, observation, session or dataset run)")
    if kind not in ("observation", "trace", "session"):
        return []
    comment = row.get("comment")
    return [Label(str(row["name"]), trace_id, ident if kind == "observation" else None,
                  ident if kind == "session" else None, score_value(row), "langfuse",
                  annotator=str(row.get("authorUserId") or ""), rationale=None if comment is None else str(comment),
                  at=epoch_s(row["updatedAt"]), source_id=str(row["id"]))]


class LangfuseLabels(BackendReader):
    """People's scores in the Langfuse project of the sink's keys."""

    def __init__(self, sinks: SinksConfig, retry: Retry | None = None, page_size: int = 500) -> None:
        super().__init__("langfuse", sinks.langfuse.url(), sinks, retry, page_size)
        self.api = f"{self.base_url}/api/public"

    async def pages(self, cursor: str | None, since_s: float,
                    names: Sequence[str]) -> AsyncIterator[tuple[list[Label], str]]:
        """The labels new or changed since ``cursor``, in pages (every scorer name: ``names`` is
        not used; see the module docstring).

        Raises:
            collector.common.errors.PullError: Langfuse refused (401: the keys), failed or garbled an answer.
        """
        self.begin()
        now = time.time()
        sweep = Sweep(cursor, (), since_s=since_s, now=now, page_size=self.page_size)
        params: dict[str, Any] = {"source": "ANNOTATION", "fromTimestamp": iso_time(now - since_s),
                                  "limit": PER_REQUEST}
        async with self.client() as client:
            async for rows in self._scores(client, params):
                for page in sweep.add(self.rows(rows, score_label)):
                    yield page, sweep.resume
        yield sweep.finish()

    async def _scores(self, client: JsonClient, params: dict[str, Any]) -> AsyncIterator[list[Any]]:
        """People's scores, a request at a time: v3's cursor pages, else v2's numbered ones."""
        url = f"{self.api}/v3/scores"
        token: str | None = None
        while True:
            query = {**params, "fields": FIELDS, **({"cursor": token} if token else {})}
            try:
                body, rows = await client.listing("GET", url, "data", params=query)
            except PullError as err:
                if err.status != 404 or token is not None:
                    raise
                break  # a Langfuse before 3.179: the v2 endpoint
            yield rows
            meta = body.get("meta")
            token = (meta.get("cursor") or None) if isinstance(meta, dict) else None
            if token is None or not rows:
                return
        url = f"{self.api}/v2/scores"
        page = 1
        while True:
            body, rows = await client.listing("GET", url, "data", params={**params, "page": page})
            yield rows
            meta = expect(f"GET {url}", body.get("meta"), dict, "pagination in 'meta'")
            pages = meta.get("totalPages")
            if not rows or not isinstance(pages, int) or page >= pages:
                return
            page += 1
