"""What every backend reader hands on: pages of complete traces, and the token of the next page.

A `Puller` lists the traces of a window a page at a time, in the backend's own order
(oldest first where the API can sort), fetches every span of the page's traces, and yields
a `Page`: whole traces (so the adapters see each trace as the daemon's assembly would have),
and the opaque token that starts the page after it. Only one page is held at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from adapters import AssembledTrace, TraceSpan, assemble
from collector.receive.pull.client import JsonClient
from collector.receive.pull.source import Window, iso


@dataclass(frozen=True)
class Page:
    """One page of a backend's traces.

    Attributes:
        traces: the page's traces, each with every span the backend has of it.
        next: the token of the page after this one (None: this is the last).
        total: how many traces the window holds, when the backend says (else None).
        token: the token this page was read with (None: the first page).
        spans: the spans read for the page.
        missing: traces listed whose spans the backend did not give (MLflow traces logged with
            their spans in the artifact store, a trace deleted meanwhile): counted, not scored.
    """

    traces: list[AssembledTrace]
    next: str | None
    total: int | None = None
    token: str | None = None
    spans: int = field(default=0)
    missing: int = 0


class Puller(Protocol):
    """One backend's read API."""

    name: str

    async def check(self) -> None:
        """Fail at once (`collector.common.errors.PullError`) when the project or experiment is
        unknown or the credentials are refused: before anything is scored."""
        ...

    def pages(self, token: str | None) -> AsyncIterator[Page]:
        """The pages of the window, from the page ``token`` names (None: the first)."""
        ...


class Reader:
    """What every backend's `Puller` is given: the HTTP client, the window, the backend's own
    filter (passed through as given) and the page size."""

    def __init__(self, client: JsonClient, window: Window, filter_text: str | None, page_size: int) -> None:
        self.client = client
        self.window = window
        self.filter = filter_text
        self.page_size = page_size

    def window_params(self, since: str, until: str) -> dict[str, str]:
        """The window as the backend's two query parameters (ISO 8601 times; absent when open).

        Example:
            >>> from datetime import UTC, datetime
            >>> r = Reader(JsonClient(), Window(datetime(2026, 12, 1, tzinfo=UTC)), None, 10)
            >>> r.window_params("start_time", "end_time")
            {'start_time': '2026-12-01T00:00:00.000000Z'}
        """
        params = {}
        if self.window.since is not None:
            params[since] = iso(self.window.since)
        if self.window.until is not None:
            params[until] = iso(self.window.until)
        return params


def page_of(spans: Iterable[TraceSpan], order: list[str], next_token: str | None, token: str | None,
            total: int | None = None) -> Page:
    """Group a page's spans into its traces, in the order the backend listed them.

    Example:
        >>> a, b = TraceSpan("a" * 32, "1" * 16, None, "x"), TraceSpan("b" * 32, "2" * 16, None, "y")
        >>> page = page_of([a, b], ["b" * 32, "a" * 32], "t2", None)
        >>> ([t.trace_id[0] for t in page.traces], page.next, page.spans, page.missing)
        (['b', 'a'], 't2', 2, 0)
    """
    spans = list(spans)
    by_id = {trace.trace_id: trace for trace in assemble(spans, [])}
    listed = list(dict.fromkeys(order))
    traces = [by_id[trace_id] for trace_id in listed if trace_id in by_id]
    return Page(traces, next_token, total, token, len(spans), len(listed) - len(traces))


async def read_ahead(pages: AsyncIterator[Page]) -> AsyncIterator[Page]:
    """``pages``, with the next page read while the caller scores the current one (the backend's
    answer time overlaps scoring; two pages are held at most). A page the caller never asks for
    is abandoned (its request cancelled) when the caller stops.

    Example:
        >>> async def three():
        ...     for n in range(3):
        ...         yield Page([], str(n + 1) if n < 2 else None)
        >>> async def tokens():
        ...     return [page.next async for page in read_ahead(three())]
        >>> asyncio.run(tokens())
        ['1', '2', None]
    """
    iterator = aiter(pages)
    pending: asyncio.Future[Page] = asyncio.ensure_future(anext(iterator))
    try:
        while True:
            try:
                page = await pending
            except StopAsyncIteration:
                return
            pending = asyncio.ensure_future(anext(iterator))
            yield page
    finally:  # the caller stopped: the page it will not use is let go (its error too)
        pending.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await pending
