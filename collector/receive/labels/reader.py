"""What the three backends' label readers share: the HTTP client of their sink, and rows that
are not what the backend's API returns (skipped, counted, said once a pull).

The client is `collector.receive.pull.JsonClient` with the sink's credentials as ``score --from``
finds them (`collector.receive.pull.client_for`: ``[sinks.*]`` keys and tokens, ``env:NAME``,
else the backend's usual variables), so a refused key, an outage or a garbled answer is the same
one-line `collector.common.errors.PullError` (method, URL, HTTP status and the backend's
message; credentials never in it). A request that gets no answer, 429 or a 5xx is tried three
times, with the sink's backoff bounds (``min_backoff_s``, ``max_backoff_s``), each allowed at
least 60 s (the sink's ``timeout_s`` when longer): a pull given up on is tried again at the next
poll.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from collector.config import SinksConfig
from collector.receive.pull import JsonClient, Retry, Source, client_for

logger = logging.getLogger(__name__)

T = TypeVar("T")
ROW_ERRORS = (KeyError, TypeError, ValueError, AttributeError)
"""What reading a row that is not shaped like the API's raises: the row is skipped."""


def chunks(items: list[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of at most ``size``.

    Example:
        >>> list(chunks([1, 2, 3, 4, 5], 2))
        [[1, 2], [3, 4], [5]]
    """
    for start in range(0, len(items), size):
        yield items[start:start + size]


class BackendReader:
    """A backend's label reader: its sink's client, and the count of rows skipped.

    Example:
        >>> from collector.common.labels import Label
        >>> r = BackendReader("phoenix", "http://127.0.0.1:6006", SinksConfig())
        >>> r.rows([{"ok": 1}, "garbage"], lambda row: [Label("Q", "ab" * 16, None, None, row["ok"], "phoenix")])
        [Label(name='Q', trace_id='abababababababababababababababab', span_id=None, session_id=None, value=1, source='phoenix', annotator='', rationale=None, at=0.0, source_id='')]
        >>> r.skipped
        1
    """

    def __init__(self, source: str, base_url: str, sinks: SinksConfig, retry: Retry | None = None,
                 page_size: int = 500) -> None:
        self.source = source
        self.base_url = base_url.rstrip("/")
        self.sinks = sinks
        sink = getattr(sinks, source)
        # Three tries with the sink's backoff; a read of 500 traces may take longer than a score's write.
        self.retry = retry or Retry(attempts=3, min_backoff_s=sink.min_backoff_s, max_backoff_s=sink.max_backoff_s,
                                    timeout_s=max(60.0, sink.timeout_s))
        self.page_size = page_size
        self.skipped = 0  # rows not shaped like the API's, over the reader's life
        self._said = False

    def client(self) -> JsonClient:
        """A new client of the backend (``async with`` it), with the sink's credentials.

        Raises:
            collector.common.errors.ConfigError: a credential's ``env:NAME`` is not set.
        """
        return client_for(Source(self.source, self.base_url), self.sinks, self.retry)

    def rows(self, rows: Iterable[Any], read: Callable[[Any], Iterable[T]]) -> list[T]:
        """What ``read`` finds in each row (labels); a row it cannot read is skipped and counted
        (the first of a pull is logged as a warning)."""
        labels: list[T] = []
        for row in rows:
            try:
                labels.extend(read(row))
            except ROW_ERRORS as err:
                self.skipped += 1
                if not self._said:
                    self._said = True
                    logger.warning("%s labels: skipped a row not shaped like the API's (%r): %.200r",
                                   self.source, err, row)
                else:
                    logger.debug("%s labels: skipped a row (%r)", self.source, err)
        return labels

    def begin(self) -> None:
        """A new pull: its first skipped row is said again."""
        self._said = False
