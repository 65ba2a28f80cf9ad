"""Pass-through forwarding of received OTLP requests to the export endpoint, unchanged.

Ingest never waits on forwarding: `Forwarder.offer` puts the serialised request on a
bounded queue and returns at once; a full queue drops the request (counted). A sender
task posts each request (OTLP/gRPC or OTLP/HTTP protobuf) with a few retries and
backoff; what still fails is dropped and counted. Forwarding is best effort by design:
the daemon's own durability covers scoring, not the pass-through copy.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import Literal

import aiohttp
import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from collector._aio import cancel_and_wait
from collector.config import ExportConfig
from collector.export.scores import http_url
from collector.metrics import Metrics

logger = logging.getLogger(__name__)

Signal = Literal["traces", "logs"]
_RETRYABLE_HTTP = frozenset({429, 502, 503, 504})
_RETRYABLE_GRPC = frozenset({
    grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.ABORTED, grpc.StatusCode.CANCELLED,
})


class Forwarder:
    """Forwards raw OTLP protobuf request bodies to the configured endpoint.

    Args:
        cfg: the ``[export]`` section (endpoint, protocol, headers, queue size, timeout).
        metrics: the service's instruments.
        max_tries: sends per request before it is dropped.
        senders: requests in flight to the endpoint at most.

    Example:
        >>> import asyncio
        >>> fwd = Forwarder(ExportConfig(endpoint="http://127.0.0.1:1", forward_queue_size=1), Metrics())
        >>> fwd.offer("traces", b""), fwd.offer("traces", b"")
        (True, False)
    """

    def __init__(self, cfg: ExportConfig, metrics: Metrics, *, max_tries: int = 3, senders: int = 8) -> None:
        self._cfg = cfg
        self._metrics = metrics
        self._max_tries = max_tries
        self._senders = senders
        self._queue: asyncio.Queue[tuple[Signal, bytes]] = asyncio.Queue(cfg.forward_queue_size)
        self._tasks: list[asyncio.Task[None]] = []
        self._last_warning = 0.0
        self._unreported = 0
        self._channel: grpc.aio.Channel | None = None
        self._session: aiohttp.ClientSession | None = None
        self._headers = cfg.header_values()

    def offer(self, signal: Signal, body: bytes) -> bool:
        """Queue a serialised request for forwarding; False (and counted) when the queue is full.
        """
        try:
            self._queue.put_nowait((signal, body))
        except asyncio.QueueFull:
            self._metrics.forwarded.labels(signal=signal, outcome="dropped_full").inc()
            return False
        return True

    def backlog(self) -> int:
        """Requests waiting to be forwarded.

        Example:
            >>> Forwarder(ExportConfig(endpoint="http://127.0.0.1:1"), Metrics()).backlog()
            0
        """
        return self._queue.qsize()

    async def start(self) -> None:
        """Open the client and start sending.
        """
        if self._cfg.protocol == "grpc":
            target = self._cfg.endpoint.split("://", 1)[-1].rstrip("/")
            if self._cfg.endpoint.startswith("https://"):
                self._channel = grpc.aio.secure_channel(target, grpc.ssl_channel_credentials())
            else:
                self._channel = grpc.aio.insecure_channel(target)
        else:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self._cfg.timeout_s), auto_decompress=True
            )
        self._tasks = [asyncio.create_task(self._loop(), name=f"tracescore-forward-{i}")
                       for i in range(self._senders)]

    async def shutdown(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 (lifecycle contract)
        """Send what is queued for up to ``timeout`` seconds, then close; safe twice.
        """
        if self._tasks:
            try:
                async with asyncio.timeout(timeout):
                    await self._queue.join()
            except TimeoutError:
                logger.warning("dropping %d requests not forwarded before shutdown", self._queue.qsize())
            await cancel_and_wait(self._tasks)
            self._tasks = []
        if self._channel is not None:
            await self._channel.close()
            self._channel = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _loop(self) -> None:
        while True:
            signal, body = await self._queue.get()
            try:
                outcome = await self._send_with_retries(signal, body)
            except Exception:
                logger.exception("forwarding failed unexpectedly")
                outcome = "dropped_error"
            finally:
                self._queue.task_done()
            self._metrics.forwarded.labels(signal=signal, outcome=outcome).inc()

    async def _send_with_retries(self, signal: Signal, body: bytes) -> str:
        delay = 0.2
        for attempt in range(1, self._max_tries + 1):
            retry = await self._send(signal, body)
            if retry is None:
                return "sent"
            if not retry or attempt == self._max_tries:
                break
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))
            delay *= 2
        self._warn_dropped(signal)
        return "dropped_error"

    def _warn_dropped(self, signal: Signal) -> None:
        # Rate-limited: a backend outage would otherwise log once per request.
        self._unreported += 1
        now = time.monotonic()
        if now - self._last_warning >= 10.0:
            logger.warning("dropped %d forwarded requests the export endpoint did not accept (last: %s)",
                           self._unreported, signal)
            self._last_warning, self._unreported = now, 0

    async def _send(self, signal: Signal, body: bytes) -> bool | None:
        """Send once: None on success, else whether a retry may help."""
        if self._channel is not None:
            metadata = tuple((k.lower(), v) for k, v in self._headers.items())
            try:
                if signal == "traces":
                    await trace_service_pb2_grpc.TraceServiceStub(self._channel).Export(
                        trace_service_pb2.ExportTraceServiceRequest.FromString(body),
                        metadata=metadata, timeout=self._cfg.timeout_s)
                else:
                    await logs_service_pb2_grpc.LogsServiceStub(self._channel).Export(
                        logs_service_pb2.ExportLogsServiceRequest.FromString(body),
                        metadata=metadata, timeout=self._cfg.timeout_s)
            except grpc.aio.AioRpcError as err:
                return err.code() in _RETRYABLE_GRPC
            return None
        if self._session is None:
            return False
        url = http_url(self._cfg.endpoint, f"/v1/{signal}")
        headers = {**self._headers, "Content-Type": "application/x-protobuf"}
        try:
            async with self._session.post(url, data=body, headers=headers) as resp:
                await resp.read()
                if 200 <= resp.status < 300:
                    return None
                return resp.status in _RETRYABLE_HTTP
        except (aiohttp.ClientError, TimeoutError):
            return True
