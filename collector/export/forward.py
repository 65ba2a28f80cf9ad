"""Pass-through forwarding of received OTLP requests to the export endpoint, unchanged,
from the store's forward log (`collector.store.interface.ForwardLog`).

A receiver answers success only after the request is in the forward log (written with
the trace buffer), so a backend outage, a restart or a crash loses nothing. The
`Forwarder` is the durable senders' one loop (`collector.export.send.loop.SendLoop`) over
the forward log, in order: it sends the oldest requests and releases them once the endpoint
took them. Consecutive requests of one signal go out as one: an OTLP export request is a
repeated field, so their encodings, concatenated, are one valid request holding all of them
in order.

The endpoint's answer is read as every sender reads it (`collector.export.send.answers`):
an outage (connection refused, timeout, HTTP 408/429/5xx, gRPC UNAVAILABLE...) or an answer a
configuration change cures (HTTP 401/403/404 with the backend's message: "No Experiment with
id=1 exists"; gRPC UNAUTHENTICATED, NOT_FOUND...) keeps the requests in the log and tries
again after a backoff (``0.5 s`` doubling up to ``export.max_backoff_s``, with jitter), both
shown by ``tracescore status`` with the backend's message. A request the endpoint refuses for
good (HTTP 400/413 and the other 4xx; gRPC INVALID_ARGUMENT...) would block everything behind
it: a merged batch so refused is sent again request by request, and each request refused
alone is dropped, counted (``outcome="rejected"``) and logged with the backend's message. A
logs request to an endpoint that takes no logs (no such route) is refused so, never held.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from collector.common.metrics import Metrics
from collector.config import ExportConfig
from collector.export.send.answers import Answer
from collector.export.send.backlogs import ForwardBacklog
from collector.export.send.loop import Backoff, Batch, SendLoop
from collector.export.send.otlp import OtlpClient
from collector.export.send.watch import SendWatch
from collector.store.interface import ForwardItem, ForwardLog

logger = logging.getLogger(__name__)

MAX_BATCH_REQUESTS = 512


def merge(items: Sequence[ForwardItem]) -> list[tuple[str, list[ForwardItem]]]:
    """Cut requests, in order, into runs of one signal (each run is sent as one request).

    Example:
        >>> items = [ForwardItem(1, "traces", b"a"), ForwardItem(2, "traces", b"b"), ForwardItem(3, "logs", b"c")]
        >>> [(signal, [i.position for i in run]) for signal, run in merge(items)]
        [('traces', [1, 2]), ('logs', [3])]
    """
    runs: list[tuple[str, list[ForwardItem]]] = []
    for item in items:
        if runs and runs[-1][0] == item.signal:
            runs[-1][1].append(item)
        else:
            runs.append((item.signal, [item]))
    return runs


class ForwardCourse:
    """How forwarded requests are sent: runs of one signal as one OTLP request, unchanged."""

    def __init__(self, cfg: ExportConfig, metrics: Metrics) -> None:
        self._client = OtlpClient(cfg)
        self._metrics = metrics

    async def open(self) -> None:
        """Open the OTLP client."""
        await self._client.open()

    async def close(self) -> None:
        """Close the OTLP client."""
        await self._client.close()

    async def prepare(self, items: list[ForwardItem], flush: bool) -> tuple[list[Batch[ForwardItem]], int]:
        """Runs of one signal, in order."""
        return [Batch(run) for _, run in merge(items)], 0

    async def send(self, batch: Batch[ForwardItem]) -> Answer:
        """The run's bodies, concatenated, as one request (logs: a signal the endpoint may not take)."""
        signal = batch.items[0].signal
        return await self._client.export(signal, b"".join(item.body for item in batch.items),
                                         optional=signal != "traces")

    async def settled(self, items: list[ForwardItem], outcome: str, answer: Answer) -> None:
        """Count them per signal (``tracescore_forwarded_requests_total``)."""
        for signal, run in merge(items):
            self._metrics.forwarded.labels(signal=signal, outcome=outcome).inc(len(run))

    def describe(self, items: list[ForwardItem]) -> str:
        """``2 forwarded traces request(s) (positions 4..5)``.

        Example:
            >>> ForwardCourse(ExportConfig(), Metrics()).describe([ForwardItem(4, "traces", b""), ForwardItem(5, "traces", b"")])
            '2 forwarded traces request(s) (positions 4..5)'
        """
        signals = "/".join(dict.fromkeys(item.signal for item in items))
        return f"{len(items)} forwarded {signals} request(s) (positions {items[0].position}..{items[-1].position})"


class Forwarder(SendLoop[ForwardItem]):
    """Sends the forward log to the configured endpoint (OTLP/gRPC or OTLP/HTTP protobuf).

    Args:
        cfg: the ``[export]`` section (endpoint, protocol, headers, timeout, max backoff).
        log: the store's forward log.
        metrics: the service's instruments.
        poll_s: how often an idle forwarder looks at the log (`notify` wakes it sooner).
        backoff_s: the first retry delay after a failed send.

    Example:
        >>> Forwarder(ExportConfig(endpoint="http://127.0.0.1:1"), None, Metrics()).notify()  # type: ignore[arg-type]
    """

    def __init__(self, cfg: ExportConfig, log: ForwardLog, metrics: Metrics, *, poll_s: float = 0.2,
                 backoff_s: float = 0.5) -> None:
        watch = SendWatch("forward", cfg.destination(), "received requests are kept in the store and retried "
                          f"(backoff up to {cfg.max_backoff_s:g} s) until it takes them",
                          what=f"forwarding to {cfg.destination()}")
        super().__init__(ForwardBacklog(log), ForwardCourse(cfg, metrics), watch, metrics, component="forward",
                         logger=logger, batch=MAX_BATCH_REQUESTS, backoff=Backoff(backoff_s, cfg.max_backoff_s),
                         poll_s=poll_s)
