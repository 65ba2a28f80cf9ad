"""Reading a Langfuse project: ``--from langfuse+https://host`` (the keys name the project).

Langfuse's public API, basic auth with the project's public and secret key (``[sinks.langfuse]``
or ``LANGFUSE_PUBLIC_KEY`` / ``LANGFUSE_SECRET_KEY``): ``GET /api/public/projects`` (401: keys
refused), ``GET /api/public/traces`` (the window's traces, ``orderBy=timestamp.asc``,
``fromTimestamp``/``toTimestamp``, ``filter`` = Langfuse's JSON filter conditions passed
through as given; paged by ``page`` with ``meta`` {page, limit, totalItems, totalPages}), then
each trace's observations with ``GET /api/public/v2/observations?traceId=`` (fields core,
basic, io, metadata, metadata not truncated; paged by ``meta.cursor``; the v1 observations
list is deprecated: "queries the legacy observations table").

An observation ingested over OTLP keeps its span's ids (hex), times (to the millisecond),
parent, and in its metadata the span's attributes, resource and scope; its messages became
``input``/``output`` (`collector.receive.pull.langfuse_io` puts them back).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from datetime import datetime
from typing import Any

from adapters import TraceSpan
from collector.common.errors import PullError
from collector.receive.pull.client import JsonClient, expect
from collector.receive.pull.langfuse_io import parsed, restore_io
from collector.receive.pull.page import Page, Reader, page_of
from collector.receive.pull.source import Window

FIELDS = "core,basic,io,metadata"
EXPANDED = "attributes,resourceAttributes,scope"


def time_ns(value: Any) -> int:
    """An ISO 8601 time of the API in Unix nanoseconds (0 when absent).

    Example:
        >>> time_ns("2026-12-01T00:00:00.250Z"), time_ns(None)
        (1796083200250000000, 0)
    """
    if not value:
        return 0
    when = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return int(when.timestamp()) * 1_000_000_000 + when.microsecond * 1000


def _mapping(value: Any) -> dict[str, Any]:
    value = parsed(value)  # a metadata value may come back as its JSON text
    return dict(value) if isinstance(value, Mapping) else {}


def observation_span(obs: Mapping[str, Any]) -> TraceSpan:
    """One observation (``ObservationV2``) as the span it was ingested from.

    Example:
        >>> span = observation_span({"id": "cd" * 8, "traceId": "ab" * 16, "parentObservationId": None,
        ...     "name": "chat m", "startTime": "2026-12-01T00:00:00.000Z", "endTime": "2026-12-01T00:00:01.000Z",
        ...     "level": "ERROR", "input": "[]", "metadata": {"attributes": {"gen_ai.operation.name": "chat"},
        ...     "resourceAttributes": {"service.name": "bot"}, "scope": {"name": "agent", "version": "1"}}})
        >>> (span.service, span.scope_name, span.status_code, span.attributes["gen_ai.input.messages"])
        ('bot', 'agent', 2, '[]')
    """
    metadata = _mapping(obs.get("metadata"))
    scope = _mapping(metadata.get("scope"))
    scope_name = str(scope.get("name") or "")
    start = time_ns(obs.get("startTime"))
    return TraceSpan(
        trace_id=str(obs.get("traceId") or ""), span_id=str(obs["id"]),
        parent_span_id=obs.get("parentObservationId") or None, name=str(obs.get("name") or ""),
        start_ns=start, end_ns=time_ns(obs.get("endTime")) or start,
        attributes=restore_io(_mapping(metadata.get("attributes")), obs.get("input"), obs.get("output"), scope_name),
        status_code=2 if obs.get("level") == "ERROR" else 0,
        resource=_mapping(metadata.get("resourceAttributes")),
        scope_name=scope_name, scope_version=str(scope.get("version") or ""),
    )


class LangfusePuller(Reader):
    """The traces of one Langfuse project in a window, a page at a time."""

    name = "langfuse"

    def __init__(self, client: JsonClient, base_url: str, window: Window, filter_text: str | None = None,
                 page_size: int = 50) -> None:
        super().__init__(client, window, filter_text, page_size)
        self.api = f"{base_url}/api/public"

    async def check(self) -> None:
        """`collector.common.errors.PullError` when the keys are refused (401)."""
        await self.client.get(f"{self.api}/projects")

    async def pages(self, token: str | None) -> AsyncIterator[Page]:
        """The window's traces, oldest first, from the page number ``token`` names."""
        page = int(token or 1)
        url = f"{self.api}/traces"
        while True:
            params: dict[str, Any] = {"page": page, "limit": self.page_size, "orderBy": "timestamp.asc",
                                      **self.window_params("fromTimestamp", "toTimestamp")}
            if self.filter:
                params["filter"] = self.filter
            body, rows = await self.client.listing("GET", url, "data", params=params)
            meta = expect(f"GET {url}", body.get("meta"), dict, "pagination in 'meta'")
            total_pages, total = meta.get("totalPages"), meta.get("totalItems")
            order = [str(row.get("id")) for row in rows if isinstance(row, Mapping)]
            next_token = str(page + 1) if isinstance(total_pages, int) and page < total_pages and rows else None
            spans: list[TraceSpan] = []
            for trace_id in order:
                spans.extend(await self._observations(trace_id))
            yield page_of(spans, order, next_token, token, total if isinstance(total, int) else None)
            if next_token is None:
                return
            page, token = page + 1, next_token

    async def _observations(self, trace_id: str) -> list[TraceSpan]:
        """Every observation of one trace, as spans."""
        url = f"{self.api}/v2/observations"
        spans: list[TraceSpan] = []
        cursor: str | None = None
        while True:
            params = {"traceId": trace_id, "fields": FIELDS, "expandMetadata": EXPANDED, "limit": 1000}
            if cursor:
                params["cursor"] = cursor
            body, rows = await self.client.listing("GET", url, "data", params=params)
            try:
                spans.extend(observation_span(row) for row in rows)
            except (KeyError, TypeError, ValueError, json.JSONDecodeError) as err:
                raise PullError(f"GET {url}: an observation is not shaped like Langfuse's: {err!r}"[:300]) from None
            cursor = (body.get("meta") or {}).get("cursor") or None
            if cursor is None or not rows:
                return spans
