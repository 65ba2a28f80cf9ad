"""The read side of the Langfuse test server's scores: ``GET /api/public/v3/scores`` and the
deprecated ``GET /api/public/v2/scores``, as Langfuse answers them (filters ``source``, ``name``,
``fromTimestamp``/``toTimestamp`` on the score's timestamp; v3: at most 100 a page, an opaque
``meta.cursor``, ``fields`` groups ``details``, ``subject``, ``annotation``; v2: numbered pages),
newest first. Every answer is checked against the ``langfuse`` package's own response types
(``GetScoresV3Response``; v2 rows against ``Score``, its page against ``MetaResponse``), so a row
this server gives is a row Langfuse could give.

A stored score is a ``CreateScoreRequest`` body (what ``POST /api/public/scores`` took, or what
a test seeded as a person's score) plus what Langfuse adds: ``source`` (API unless given),
``createdAt``, ``updatedAt`` and ``authorUserId``.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from langfuse.api import GetScoresV3Response, Score
from langfuse.api.core.pydantic_utilities import parse_obj_as
from langfuse.api.utils.pagination.types import MetaResponse

FIELD_GROUPS = {"details", "subject", "annotation"}


def iso_ms(epoch: float) -> str:
    """Unix seconds as Langfuse writes times (milliseconds, ``Z``).

    Example:
        >>> iso_ms(1796083200.25)
        '2026-12-01T00:00:00.250Z'
    """
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _typed(body: dict[str, Any]) -> Any:
    kind, value = body.get("dataType", "NUMERIC"), body["value"]
    if kind == "BOOLEAN":
        return value == 1
    return float(value) if kind == "NUMERIC" else str(value)


def v3_row(body: dict[str, Any], fields: set[str]) -> dict[str, Any]:
    """A stored score as a v3 row, with the field groups asked for."""
    row: dict[str, Any] = {
        "id": body["id"], "projectId": "test-project", "name": body["name"], "source": body.get("source", "API"),
        "dataType": body.get("dataType", "NUMERIC"), "value": _typed(body), "timestamp": body["timestamp"],
        "environment": body.get("environment", "default"), "createdAt": body["createdAt"],
        "updatedAt": body["updatedAt"]}
    if "details" in fields:
        row.update(comment=body.get("comment"), configId=body.get("configId"), metadata=body.get("metadata"))
    if "annotation" in fields:
        row.update(authorUserId=body.get("authorUserId"), queueId=body.get("queueId"))
    if "subject" in fields:
        if body.get("sessionId"):
            row["subject"] = {"kind": "session", "id": body["sessionId"]}
        elif body.get("observationId"):
            row["subject"] = {"kind": "observation", "id": body["observationId"], "traceId": body.get("traceId")}
        elif body.get("traceId"):
            row["subject"] = {"kind": "trace", "id": body["traceId"]}
        else:
            row["subject"] = {"kind": "experiment", "id": body.get("datasetRunId") or ""}
    return row


def v2_row(body: dict[str, Any]) -> dict[str, Any]:
    """A stored score as a v2 row (a number in ``value``, the text in ``stringValue``)."""
    kind = body.get("dataType", "NUMERIC")
    row = {key: body.get(key) for key in ("id", "traceId", "sessionId", "observationId", "datasetRunId", "name",
                                          "timestamp", "createdAt", "updatedAt", "authorUserId", "comment",
                                          "metadata", "configId", "queueId")}
    row.update(source=body.get("source", "API"), environment=body.get("environment", "default"), dataType=kind)
    if kind == "CATEGORICAL":
        row.update(value=0.0, stringValue=str(body["value"]))
    elif kind == "BOOLEAN":
        row.update(value=float(body["value"]), stringValue="True" if body["value"] == 1 else "False")
    else:
        row["value"] = float(body["value"])
    return row


def matching(scores: list[dict[str, Any]], query: Any) -> list[dict[str, Any]] | str:
    """The stored scores the query's filters keep, newest first (or why the query is refused)."""
    found = list(scores)
    for key in ("source", "name"):
        if key in query:
            wanted = {v.strip().upper() if key == "source" else v.strip() for v in query[key].split(",")}
            found = [s for s in found if (s.get("source", "API").upper() if key == "source" else s["name"]) in wanted]
    try:
        if "fromTimestamp" in query:
            found = [s for s in found if _time(s["timestamp"]) >= _time(query["fromTimestamp"])]
        if "toTimestamp" in query:
            found = [s for s in found if _time(s["timestamp"]) < _time(query["toTimestamp"])]
    except ValueError as err:
        return f"invalid timestamp: {err}"
    return sorted(found, key=lambda s: (_time(s["timestamp"]), s["id"]), reverse=True)


def checked_sample(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row of each shape (data type, subject, fields with a value): what the SDK's types check
    (its parsing takes ~5 ms a row: every row of every page would slow the tests for nothing).

    Example:
        >>> len(checked_sample([{"dataType": "NUMERIC", "value": 1.0}, {"dataType": "NUMERIC", "value": 2.0}]))
        1
    """
    shapes: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        kind = (row.get("subject") or {}).get("kind")
        shapes.setdefault((row.get("dataType"), kind, *sorted(k for k, v in row.items() if v is not None)), row)
    return list(shapes.values())


def v3_answer(scores: list[dict[str, Any]], query: Any) -> web.Response:
    """``GET /api/public/v3/scores``."""
    limit = int(query.get("limit", 50))
    fields = {f for f in query.get("fields", "").split(",") if f}
    if limit > 100 or limit < 1:
        return web.json_response({"message": f"limit must be between 1 and 100, got {limit}"}, status=400)
    if fields - FIELD_GROUPS:
        return web.json_response({"message": f"unknown field groups {sorted(fields - FIELD_GROUPS)}"}, status=400)
    found = matching(scores, query)
    if isinstance(found, str):
        return web.json_response({"message": found}, status=400)
    start = int(base64.urlsafe_b64decode(query["cursor"]).decode()) if query.get("cursor") else 0
    end = start + limit
    meta: dict[str, Any] = {"limit": limit}
    if end < len(found):
        meta["cursor"] = base64.urlsafe_b64encode(str(end).encode()).decode()
    body = {"data": [v3_row(s, fields) for s in found[start:end]], "meta": meta}
    parse_obj_as(GetScoresV3Response, {**body, "data": checked_sample(body["data"])})  # the SDK's type of the answer
    return web.json_response(body)


def v2_answer(scores: list[dict[str, Any]], query: Any) -> web.Response:
    """``GET /api/public/v2/scores``."""
    found = matching(scores, query)
    if isinstance(found, str):
        return web.json_response({"message": found}, status=400)
    page, limit = int(query.get("page", 1)), int(query.get("limit", 50))
    rows = [v2_row(s) for s in found[(page - 1) * limit: page * limit]]
    for row in checked_sample(rows):
        parse_obj_as(Score, row)  # the SDK's type of a v2 score
    meta = {"page": page, "limit": limit, "totalItems": len(found), "totalPages": -(-len(found) // limit)}
    parse_obj_as(MetaResponse, meta)
    return web.json_response({"data": rows, "meta": meta})
