"""Reading an MLflow experiment: ``--from mlflow+http://host:5000/<experiment id>``.

MLflow 3's REST API: ``GET /api/2.0/mlflow/experiments/get?experiment_id=`` (404
``RESOURCE_DOES_NOT_EXIST``: no such experiment), ``POST /api/3.0/mlflow/traces/search``
(the experiment's traces oldest first, ``filter`` = ``trace.timestamp_ms`` bounds of the
window AND the user's ``--filter`` in MLflow's own search syntax, paged by
``next_page_token``), then the page's spans with ``GET /api/3.0/mlflow/traces/batchGet
?trace_ids=...`` (OTLP ``Span`` objects in proto3 JSON: base64 ids). Auth: ``Authorization:
Bearer <token>`` (``[sinks.mlflow] token`` or ``MLFLOW_TRACKING_TOKEN``).

What MLflow keeps: a trace's resource as trace tags (``service.name`` and the rest; tags of
its own start with ``mlflow.``), so runs read back keep their service; span ids, names,
times to the nanosecond, status, events and attributes. MLflow stores attribute values as
JSON and answers JSON-looking text as structured values (``gen_ai.input.messages`` comes
back a list of messages, not its JSON text); the adapters read either. MLflow adds attributes
of its own (``mlflow.spanType``, ``mlflow.spanInputs``...): a span that carries a GenAI
operation is still read as GenAI, one that MLflow's own client traced by `adapters.mlflow`.
The span kind and the scope are not kept.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from adapters import TraceSpan
from collector.receive.pull.client import JsonClient, expect
from collector.receive.pull.otlp_json import trace_spans
from collector.receive.pull.page import Page, Reader, page_of
from collector.receive.pull.source import Source, Window


def search_filter(window: Window, user_filter: str | None) -> str:
    """The ``filter`` of a search: the window's bounds and the user's filter, ANDed.

    Example:
        >>> from datetime import UTC, datetime
        >>> search_filter(Window(datetime(2026, 12, 1, tzinfo=UTC), None), "tag.env = 'prod'")
        "trace.timestamp_ms >= 1796083200000 AND tag.env = 'prod'"
        >>> search_filter(Window(), None)
        ''
    """
    clauses = []
    if window.since_ms is not None:
        clauses.append(f"trace.timestamp_ms >= {window.since_ms}")
    if window.until_ms is not None:
        clauses.append(f"trace.timestamp_ms < {window.until_ms}")
    if user_filter:
        clauses.append(user_filter)
    return " AND ".join(clauses)


def resource_of(info: Mapping[str, Any]) -> dict[str, str]:
    """The resource MLflow kept of a trace: its tags but MLflow's own.

    Example:
        >>> resource_of({"tags": {"service.name": "bot", "mlflow.trace.spansLocation": "TRACKING_STORE"}})
        {'service.name': 'bot'}
    """
    tags = info.get("tags") or {}
    return {str(k): str(v) for k, v in tags.items() if not str(k).startswith("mlflow.")} \
        if isinstance(tags, Mapping) else {}


class MlflowPuller(Reader):
    """The traces of one MLflow experiment in a window, a page at a time."""

    name = "mlflow"

    def __init__(self, client: JsonClient, source: Source, window: Window, filter_text: str | None = None,
                 page_size: int = 100) -> None:
        super().__init__(client, window, filter_text, page_size)
        self.base = source.base_url
        self.experiment = source.target

    async def check(self) -> None:
        """`collector.common.errors.PullError` when the experiment is unknown or the token refused."""
        await self.client.get(f"{self.base}/api/2.0/mlflow/experiments/get", {"experiment_id": self.experiment})

    async def pages(self, token: str | None) -> AsyncIterator[Page]:
        """The window's traces, oldest first, from the page ``token`` names."""
        url = f"{self.base}/api/3.0/mlflow/traces/search"
        while True:
            query: dict[str, Any] = {
                "locations": [{"type": "MLFLOW_EXPERIMENT", "mlflow_experiment": {"experiment_id": self.experiment}}],
                "max_results": self.page_size, "order_by": ["timestamp_ms ASC"],
            }
            where = search_filter(self.window, self.filter)
            if where:
                query["filter"] = where
            if token:
                query["page_token"] = token
            body, infos = await self.client.listing("POST", url, "traces", json=query)
            ids = [str(i.get("trace_id")) for i in infos if isinstance(i, Mapping) and i.get("trace_id")]
            next_token = body.get("next_page_token") or None
            spans = await self._spans(ids)
            yield page_of(spans, [i.removeprefix("tr-") for i in ids], next_token, token)
            if next_token is None or not infos:
                return
            token = next_token

    async def _spans(self, ids: list[str]) -> list[TraceSpan]:
        """Every span of the traces, each with its trace's resource."""
        if not ids:
            return []
        url = f"{self.base}/api/3.0/mlflow/traces/batchGet"
        _, traces = await self.client.listing("GET", url, "traces", params=[("trace_ids", i) for i in ids])
        spans: list[TraceSpan] = []
        for trace in traces:
            trace = expect(f"GET {url}", trace, dict, "a trace object")
            info = trace.get("trace_info") or {}
            rows = expect(f"GET {url}", trace.get("spans", []), list, "a list of spans in 'spans'")
            spans.extend(trace_spans(rows, resource_of(info), where=f"GET {url}"))
        return spans
