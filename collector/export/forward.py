"""Pass-through forwarding of received OTLP requests to the export endpoint, unchanged,
from the store's forward log (`collector.store.interface.ForwardLog`).

A receiver answers success only after the request is in the forward log (written with
the trace buffer), so a backend outage, a restart or a crash loses nothing: the
`Forwarder` reads the oldest requests, sends them in order and releases them only once
the endpoint accepted them; on a retryable failure (connection refused, timeout, HTTP
429/502/503/504, gRPC UNAVAILABLE and the like) it sends the same requests again after a
backoff (``0.5 s`` doubling up to ``export.max_backoff_s``, with jitter). Consecutive
requests of one signal go out as one: an OTLP export request is a repeated field, so
their encodings, concatenated, are one valid request holding all of them in order.

A request the endpoint refuses for good (HTTP 400/413 and other codes the OTLP
specification says not to retry; gRPC INVALID_ARGUMENT and the like) would block
everything behind it: a merged batch so refused is sent again request by request, and
each request refused alone is dropped, counted (``outcome="rejected"``) and logged.

An outage is logged twice (`collector.export.outage.OutageWatch`): a warning when a send
first fails, naming the endpoint and the cause (the HTTP status, the gRPC status, or the
exception), and a line when the endpoint takes requests again, with how long it lasted and
how many attempts failed; each failed attempt in between is a DEBUG line.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass

import aiohttp
import grpc

from collector.common.aio import cancel_and_wait, wait_event
from collector.common.metrics import Metrics
from collector.config import ExportConfig, without_password
from collector.export.outage import OutageWatch, describe_error, one_line
from collector.export.scores import http_url
from collector.store.interface import ForwardItem, ForwardLog

logger = logging.getLogger(__name__)

_RETRYABLE_HTTP = frozenset({429, 502, 503, 504})
_RETRYABLE_GRPC = frozenset({
    grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.ABORTED, grpc.StatusCode.CANCELLED, grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.DATA_LOSS,
})
_GRPC_METHODS = {"traces": "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                 "logs": "/opentelemetry.proto.collector.logs.v1.LogsService/Export"}
MAX_BATCH_BYTES = 2 * 1024 * 1024  # below gRPC's default 4 MiB receive limit of most backends
MAX_BATCH_REQUESTS = 512


@dataclass(frozen=True)
class Refused:
    """A send the endpoint did not take: whether to try it again, and why (for the log).

    Example:
        >>> Refused(retryable=True, cause="HTTP 503 Service Unavailable").retryable
        True
    """

    retryable: bool
    cause: str


Sent = Refused | None
"""One send's outcome: None when the endpoint accepted it."""


def grpc_cause(err: grpc.aio.AioRpcError) -> str:
    """A failed gRPC call's cause in one line: its status code and details.

    Example:
        >>> from grpc.aio import AioRpcError, Metadata
        >>> grpc_cause(AioRpcError(grpc.StatusCode.UNAVAILABLE, Metadata(), Metadata(), details="no backend"))
        'gRPC UNAVAILABLE: no backend'
    """
    details = err.details() or ""
    return one_line(f"gRPC {err.code().name}: {details}" if details else f"gRPC {err.code().name}")


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


class Forwarder:
    """Sends the forward log to the configured endpoint (OTLP/gRPC or OTLP/HTTP protobuf).

    Args:
        cfg: the ``[export]`` section (endpoint, protocol, headers, timeout, max backoff).
        log: the store's forward log.
        metrics: the service's instruments.
        poll_s: how often an idle forwarder looks at the log (`notify` wakes it sooner).
        backoff_s: the first retry delay after a failed send.
    """

    def __init__(self, cfg: ExportConfig, log: ForwardLog, metrics: Metrics, *, poll_s: float = 0.2,
                 backoff_s: float = 0.5) -> None:
        self._cfg = cfg
        self._log = log
        self._metrics = metrics
        self._poll = poll_s
        self._backoff = backoff_s
        self._failures = 0
        self._headers = cfg.header_values()
        self._channel: grpc.aio.Channel | None = None
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._stop = asyncio.Event()  # cuts a backoff wait short (new requests do not)
        self._stopping = False
        self._outage = OutageWatch(f"forwarding to {cfg.destination()}", "received requests are kept in the store and retried "
                                          f"(backoff up to {cfg.max_backoff_s:g} s) until it takes them")

    def notify(self) -> None:
        """Wake the forwarding loop (a request was added).

        Example:
            >>> Forwarder(ExportConfig(endpoint="http://127.0.0.1:1"), None, Metrics()).notify()  # type: ignore[arg-type]
        """
        if self._wake is not None:
            self._wake.set()

    async def start(self) -> None:
        """Open the client and start sending (requests left by a previous process go first)."""
        if self._cfg.protocol == "grpc":
            target = self._cfg.endpoint.split("://", 1)[-1].rstrip("/")
            if self._cfg.endpoint.startswith("https://"):
                self._channel = grpc.aio.secure_channel(target, grpc.ssl_channel_credentials())
            else:
                self._channel = grpc.aio.insecure_channel(target)
        else:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._cfg.timeout_s))
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._loop(), name="tracescore-forward")

    async def shutdown(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 (lifecycle contract)
        """Send what the log holds for up to ``timeout`` seconds, then close (the rest stays in
        the log, for the next start); safe twice."""
        if self._task is not None:
            self._stopping = True
            self._stop.set()
            self.notify()
            try:
                async with asyncio.timeout(timeout):
                    await self._task
                    while await self.forward_batch() > 0:
                        pass
            except TimeoutError:
                state = await self._log.forward_state()
                logger.info("%d received requests not forwarded yet are sent after the restart", state.requests)
            await cancel_and_wait([self._task])
            self._task = None
        if self._channel is not None:
            await self._channel.close()
            self._channel = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _loop(self) -> None:
        wake = self._wake or asyncio.Event()
        while not self._stopping:
            try:
                sent = await self.forward_batch()
            except Exception:
                self._metrics.errors.labels(component="forward").inc()
                logger.exception("forwarding failed unexpectedly")
                sent = -1
            if sent < 0:
                self._failures += 1
                delay = min(self._cfg.max_backoff_s, self._backoff * 2 ** (self._failures - 1))
                await wait_event(self._stop, delay * random.uniform(0.8, 1.2))
            elif sent == 0 and not self._stopping:
                await wait_event(wake, self._poll)
                wake.clear()

    async def forward_batch(self) -> int:
        """Send the oldest requests of the log once; returns how many left it (0: none
        waited, -1: the endpoint did not take them, they wait for the next attempt)."""
        items = await self._log.forward_pending(MAX_BATCH_BYTES, MAX_BATCH_REQUESTS)
        if not items:
            return 0
        through, done, failed = None, 0, False
        for signal, run in merge(items):
            outcome = await self._send(signal, b"".join(item.body for item in run))
            if outcome is not None and not outcome.retryable and len(run) > 1:  # find the one refused
                outcome = await self._send_each(signal, run)
            elif outcome is not None and not outcome.retryable:
                self._rejected(signal, run, outcome.cause)
            if outcome is not None and outcome.retryable:
                self._metrics.forwarded.labels(signal=signal, outcome="retried").inc(len(run))
                self._failed(signal, run, outcome.cause)
                failed = True
                break
            if outcome is None:
                self._metrics.forwarded.labels(signal=signal, outcome="sent").inc(len(run))
            through, done = run[-1].position, done + len(run)
        if through is not None:
            await self._log.forward_release(through)
            self._failures = 0
            if not failed and (line := self._outage.recovered()) is not None:
                # A warning as the outage's was: whoever saw that one at the default level sees this.
                logger.warning("%s", line)
        return done if done else -1

    async def _send_each(self, signal: str, run: list[ForwardItem]) -> Sent:
        """Send a refused batch request by request: drop those refused alone (None when every
        one was accepted or dropped; the retryable refusal when one met one: the batch is retried)."""
        for item in run:
            outcome = await self._send(signal, item.body)
            if outcome is not None and outcome.retryable:
                return outcome
            if outcome is not None:
                self._rejected(signal, [item], outcome.cause)
        return None

    def _rejected(self, signal: str, run: list[ForwardItem], cause: str) -> None:
        self._metrics.forwarded.labels(signal=signal, outcome="rejected").inc(len(run))
        logger.error("%s refused %d forwarded %s request(s) for good (%s; positions %d..%d); dropped",
                     without_password(self._cfg.endpoint), len(run), signal, cause, run[0].position,
                     run[-1].position)

    def _failed(self, signal: str, run: list[ForwardItem], cause: str) -> None:
        """A retryable failure: the outage's first line, or a DEBUG line during one."""
        line = self._outage.failed(cause, requests=len(run))
        if line is not None:
            logger.warning("%s", line)
        else:
            logger.debug("forwarding %d %s request(s) failed again: %s", len(run), signal, cause)

    async def _send(self, signal: str, body: bytes) -> Sent:
        """Send one request body once (see `Sent`)."""
        if self._channel is not None:
            return await self._send_grpc(self._channel, signal, body)
        if self._session is None:
            return Refused(retryable=True, cause="the HTTP client is closed")
        url = http_url(self._cfg.endpoint, f"/v1/{signal}")
        headers = {**self._headers, "Content-Type": "application/x-protobuf"}
        try:
            async with self._session.post(url, data=body, headers=headers) as resp:
                await resp.read()
                if 200 <= resp.status < 300:
                    return None
                cause = one_line(f"HTTP {resp.status} {resp.reason or ''}")
                return Refused(retryable=resp.status in _RETRYABLE_HTTP, cause=cause)
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            return Refused(retryable=True, cause=describe_error(err))

    async def _send_grpc(self, channel: grpc.aio.Channel, signal: str, body: bytes) -> Sent:
        """Send one request body once over gRPC (see `Sent`)."""
        metadata = tuple((k.lower(), v) for k, v in self._headers.items())
        export = channel.unary_unary(_GRPC_METHODS[signal])  # bytes in, bytes out
        try:
            await export(body, metadata=metadata, timeout=self._cfg.timeout_s)
        except grpc.aio.AioRpcError as err:
            too_large = err.code() is grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than" in (err.details() or "")
            return Refused(retryable=err.code() in _RETRYABLE_GRPC and not too_large, cause=grpc_cause(err))
        return None
