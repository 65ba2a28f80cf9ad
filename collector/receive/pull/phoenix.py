"""Reading a Phoenix project: ``--from phoenix+http://host:6006/<project>``.

Phoenix 20's REST API (its ``/openapi.json``): ``GET /v1/projects/{project}`` (404: no such
project), ``GET /v1/projects/{project}/traces`` (the window's traces by start time, oldest
first, ``start_time`` inclusive, ``end_time`` exclusive, ``filter`` = a Phoenix trace filter
expression passed through as given, paged by ``next_cursor``), then the page's spans with
``GET /v1/projects/{project}/spans/otlpv1?trace_id=...`` (OTLP JSON, paged by ``next_cursor``).
Auth: ``Authorization: Bearer <api key>`` when Phoenix runs with auth.

What Phoenix keeps of a span: ids, name, kind, times (to the microsecond), status, events and
attributes; not the resource (its ``service.name``) nor the scope, so runs read back have an
empty service. At ingestion Phoenix also writes OpenInference attributes derived from a span's
``gen_ai.*`` ones (``phoenix.trace.gen_ai.conversion``: ``openinference.span.kind``,
``llm.*``, ``input.*``/``output.*``, ``tool.*``...). A span with ``gen_ai.*`` attributes is
read without those (`drop_derived`), so the adapters read it by the convention it was sent
in, as the daemon did live.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import quote

from adapters import TraceSpan
from collector.receive.pull.client import JsonClient
from collector.receive.pull.otlp_json import trace_spans
from collector.receive.pull.page import Page, Reader, page_of
from collector.receive.pull.source import Source, Window

_DERIVED_KEYS = frozenset({"openinference.span.kind", "input.value", "input.mime_type", "output.value",
                           "output.mime_type", "tool.name", "tool.description", "tool.id", "tool.parameters"})
_DERIVED_PREFIXES = ("llm.", "embedding.", "retrieval.")


def drop_derived(span: TraceSpan) -> TraceSpan:
    """``span`` without the OpenInference attributes Phoenix derives from ``gen_ai.*`` ones (a
    span without ``gen_ai.*`` attributes is returned as it is).

    Example:
        >>> s = TraceSpan("a" * 32, "b" * 16, None, "chat", attributes={
        ...     "gen_ai.operation.name": "chat", "openinference.span.kind": "LLM",
        ...     "llm.model_name": "m", "session.id": "c1"})
        >>> sorted(drop_derived(s).attributes)
        ['gen_ai.operation.name', 'session.id']
        >>> oi = TraceSpan("a" * 32, "b" * 16, None, "agent", attributes={"openinference.span.kind": "AGENT"})
        >>> drop_derived(oi) is oi
        True
    """
    if not any(key.startswith("gen_ai.") for key in span.attributes):
        return span
    kept = {k: v for k, v in span.attributes.items()
            if k not in _DERIVED_KEYS and not k.startswith(_DERIVED_PREFIXES)}
    return replace(span, attributes=kept)


class PhoenixPuller(Reader):
    """The traces of one Phoenix project in a window, a page at a time."""

    name = "phoenix"

    def __init__(self, client: JsonClient, source: Source, window: Window, filter_text: str | None = None,
                 page_size: int = 100) -> None:
        super().__init__(client, window, filter_text, page_size)
        self.project_url = f"{source.base_url}/v1/projects/{quote(source.target, safe='')}"

    async def check(self) -> None:
        """`collector.common.errors.PullError` when the project is unknown (404) or the key refused."""
        await self.client.get(self.project_url)

    async def pages(self, token: str | None) -> AsyncIterator[Page]:
        """The window's traces, oldest first, from the page ``token`` names."""
        while True:
            params: dict[str, Any] = {"sort": "start_time", "order": "asc", "limit": self.page_size,
                                      **self.window_params("start_time", "end_time")}
            if self.filter:
                params["filter"] = self.filter
            if token:
                params["cursor"] = token
            url = f"{self.project_url}/traces"
            body, rows = await self.client.listing("GET", url, "data", params=params)
            order = [str(row.get("trace_id")) for row in rows if isinstance(row, Mapping)]
            next_token = body.get("next_cursor") or None
            spans = [drop_derived(s) for s in await self._spans(order)]
            yield page_of(spans, order, next_token, token)
            if next_token is None or not rows:
                return
            token = next_token

    async def _spans(self, trace_ids: list[str]) -> list[TraceSpan]:
        """Every span of the traces (OTLP JSON pages of up to 1000)."""
        if not trace_ids:
            return []
        url = f"{self.project_url}/spans/otlpv1"
        spans: list[TraceSpan] = []
        cursor: str | None = None
        while True:
            params: list[tuple[str, Any]] = [("trace_id", t) for t in trace_ids] + [("limit", 1000)]
            if cursor:
                params.append(("cursor", cursor))
            body, rows = await self.client.listing("GET", url, "data", params=params)
            spans.extend(trace_spans(rows, where=f"GET {url}"))
            cursor = body.get("next_cursor") or None
            if cursor is None or not rows:
                return spans
