"""OTLP/HTTP receiver (``POST /v1/traces``, ``/v1/logs``) plus ``/metrics``, ``/healthz``, ``/readyz``.

Without a consumer the same server is a worker's listener (``serve --role worker``): metrics,
health and ``/status`` only; an OTLP path is answered 404 saying to send OTLP to a receiver.

The OTLP paths are also served with a trailing slash (``/v1/traces/``), as exporters are
sometimes configured. Any other path is answered 404 with a body (a ``google.rpc.Status``
in the request's encoding, JSON by default) and a reason phrase that name the paths served,
so a misconfigured exporter's error log says where to send.

The body is read with a cap (``max_body_bytes``) and decompressed here with the same
cap (aiohttp's own decompression is off), so neither a large body nor a gzip bomb can
exhaust memory. Answers follow the OTLP specification: success and partial success in
the request's encoding, ``google.rpc.Status`` bodies for errors, 401/400/413/415,
429/503 with Retry-After when the daemon is full or draining.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import ssl
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from google.rpc import status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from prometheus_client import CONTENT_TYPE_LATEST

from collector.common.errors import (
    CollectorError,
    InvalidPayload,
    PayloadTooLarge,
    Unauthenticated,
    UnknownPath,
    UnsupportedMediaType,
    to_http,
)
from collector.common.metrics import Metrics
from collector.receive.consumer import TraceConsumer
from collector.receive.decode import (
    JSON,
    PROTOBUF,
    Encoding,
    decode_logs,
    decompress,
    encode_message,
    media_encoding,
    parse_message,
)
from collector.receive.limits import CappedSite, ConnectionGuard
from collector.receive.memory import BodyBudget, MemoryReturner

logger = logging.getLogger(__name__)
_OFF_LOOP_BYTES = 4 * 1024 * 1024
_GRPC_CODE = {400: 3, 401: 16, 404: 5, 413: 8, 415: 3, 429: 8, 503: 14, 500: 13}
SERVED = "OTLP/HTTP is served at POST /v1/traces and POST /v1/logs (also GET /metrics, /healthz, /readyz)"
"""What a 404 says: the paths this listener serves."""
SERVED_BY_WORKER = ("this is a worker's listener (serve --role worker): it serves GET /metrics, /healthz, /readyz "
                    "and /status, never OTLP; send OTLP to a receiver")
"""What a worker's listener's 404 says."""
NOT_FOUND_REASON = "Not Found (OTLP/HTTP paths: /v1/traces, /v1/logs)"
"""The 404's reason phrase: OTLP exporters log it (the Python SDK logs only it, not the body)."""


def check_bearer(header: str | None, token: str | None) -> None:
    """Raise `Unauthenticated` unless ``header`` is ``Bearer <token>`` (no token: anything passes).

    The scheme is case-insensitive and may be followed by any whitespace (RFC 7235).

    Example:
        >>> check_bearer("Bearer s3cret", "s3cret"); check_bearer("bearer  s3cret", "s3cret")
        >>> check_bearer(None, "s3cret")
        Traceback (most recent call last):
        ...
        collector.common.errors.Unauthenticated: missing or invalid bearer token
    """
    if token is None:
        return
    scheme, _, credentials = (header or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(credentials.strip().encode(), token.encode()):
        raise Unauthenticated("missing or invalid bearer token")


def _decode_traces(
    body: bytes, content_type: str | None, content_encoding: str | None, max_bytes: int
) -> tuple[ExportTraceServiceRequest, bytes | None]:
    """The request, and its protobuf encoding (None for OTLP/JSON)."""
    encoding = media_encoding(content_type)
    data = decompress(body, content_encoding, max_bytes)
    return parse_message(data, encoding, ExportTraceServiceRequest), data if encoding == "protobuf" else None


class HttpReceiver:
    """The aiohttp server of the OTLP/HTTP listener.

    Args:
        endpoint: ``HOST:PORT`` (port 0 picks a free one; see `port`).
        consumer: where decoded requests go; None: no OTLP routes (a worker's listener).
        metrics: the service's instruments (also served on ``/metrics``).
        token: the bearer token required on OTLP routes, or None.
        max_body_bytes: the cap on body size, before and after decompression.
        ready: returns whether the service is ready (``/readyz``).
        ssl_context: serve HTTPS with this context, or None.
        status: builds the ``/status`` JSON (same bearer token as the OTLP routes); None: no route.
        max_connections: open connections at most (see `collector.receive.limits.CappedSite`).
        header_timeout_s: a new connection must send its request headers within this.
        body_timeout_s: a request's body must arrive within this (else 408).
        keepalive_timeout_s: an idle keep-alive connection is closed after this.
        budget: the body bytes in flight, shared with the gRPC listener (default: its own,
            four bodies).
        admit_wait_s: a body of known length waits this long at most for room in the
            budget before it is read (then 429 with the budget's retry delay).
        label: how a failure to listen names this listener (``HTTP``, or the key that set it).

    Example:
        >>> HttpReceiver("127.0.0.1:0", None, Metrics()).port  # type: ignore[arg-type]
        0
    """

    def __init__(
        self, endpoint: str, consumer: TraceConsumer | None, metrics: Metrics, *, token: str | None = None,
        max_body_bytes: int = 16 * 1024 * 1024, ready: Callable[[], bool] = lambda: True,
        ssl_context: ssl.SSLContext | None = None,
        status: Callable[[], Awaitable[dict[str, Any]]] | None = None, max_connections: int = 1000,
        header_timeout_s: float = 10.0, body_timeout_s: float = 60.0, keepalive_timeout_s: float = 60.0,
        budget: BodyBudget | None = None, admit_wait_s: float = 2.0, label: str = "HTTP",
    ) -> None:
        self._label = label
        self._ssl = ssl_context
        self._admit_wait = admit_wait_s
        self._status = status
        self._max_connections = max_connections
        self._header_timeout = header_timeout_s
        self._body_timeout = body_timeout_s
        self._keepalive_timeout = keepalive_timeout_s
        self._budget = budget or BodyBudget(4 * max_body_bytes)
        self._memory = MemoryReturner()
        # Own threads for large decodes: the default executor runs user scorers' sync steps.
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tracescore-http-decode")
        self.endpoint = endpoint
        host, _, port = endpoint.rpartition(":")
        self._host, self._port = host, int(port)
        self._consumer = consumer
        self._metrics = metrics
        self._token = token
        self._max = max_body_bytes
        self._ready = ready
        self._runner: web.AppRunner | None = None

    @property
    def port(self) -> int:
        """The bound port (after `start`).

        Example:
            >>> HttpReceiver("127.0.0.1:4318", None, Metrics()).port  # type: ignore[arg-type]
            4318
        """
        return self._port

    async def start(self) -> None:
        """Bind and serve.

        Raises:
            OSError: the port cannot be bound (another process listens there: the socket
                never shares a port, ``SO_REUSEPORT`` is off), naming the address.
        """
        refused = self._metrics.requests_refused
        guard = ConnectionGuard(self._max_connections, self._header_timeout,
                                on_refused=lambda reason: refused.labels(transport="http", reason=reason).inc())
        app = web.Application(client_max_size=self._max + 1, middlewares=[guard.middleware, self._unknown_path])
        for path, handler in (("/v1/traces", self._traces), ("/v1/logs", self._logs)) if self._consumer is not None else ():
            app.router.add_post(path, handler)
            app.router.add_post(path + "/", handler)  # an exporter endpoint given with a trailing slash
        app.router.add_get("/metrics", self._metrics_route)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        if self._status is not None:
            app.router.add_get("/status", self._status_route)
        self._runner = web.AppRunner(app, auto_decompress=False, access_log=None, handle_signals=False,
                                     keepalive_timeout=self._keepalive_timeout)
        await self._runner.setup()
        site = CappedSite(self._runner, self._host, self._port, guard, ssl_context=self._ssl)
        try:
            await site.start()
        except OSError as err:
            why = os.strerror(err.errno).lower() if err.errno else str(err)
            failure = OSError(f"cannot listen on {self.endpoint} ({self._label}): {why}")
            failure.errno = err.errno
            raise failure from err
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self._port = sockets[0].getsockname()[1]
        what = "OTLP/HTTP receiver" if self._consumer is not None else "HTTP listener (metrics, health, status)"
        logger.info("%s listening on %s:%d", what, self._host, self._port)

    async def shutdown(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 (lifecycle contract)
        """Stop listening and finish open requests; safe twice."""
        self._memory.cancel()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
            await asyncio.to_thread(self._pool.shutdown, True)

    async def _read_body(self, request: web.Request, reserved: list[int]) -> bytes:
        """The body, read within ``body_timeout_s`` once it has room in the budget (it waits
        in the client's socket until then); its bytes are counted in the budget
        (``reserved[0]``: how many this request holds, for the caller to release)."""
        if request.content_length is not None and request.content_length > self._max:
            raise PayloadTooLarge(f"body exceeds {self._max} bytes")
        if request.content_length:
            await self._budget.take(request.content_length, self._admit_wait)
            reserved[0] += request.content_length
        chunks, size = [], 0
        async with asyncio.timeout(self._body_timeout):
            async for chunk in request.content.iter_chunked(64 * 1024):
                size += len(chunk)
                if size > self._max:
                    raise PayloadTooLarge(f"body exceeds {self._max} bytes")
                if size > reserved[0]:  # no (or a wrong) Content-Length: count as it arrives
                    self._budget.reserve(size - reserved[0])
                    reserved[0] = size
                chunks.append(chunk)
        return b"".join(chunks)

    async def _handle(self, request: web.Request, signal: str) -> web.Response:
        consumer = self._consumer
        if consumer is None:  # never routed without one; kept for the type checker
            return self._not_found(request)
        encoding: Encoding = "json"
        reserved = [0]
        try:
            check_bearer(request.headers.get("Authorization"), self._token)
            encoding = media_encoding(request.headers.get("Content-Type"))
            body = await self._read_body(request, reserved)
            ctype, cenc = request.headers.get("Content-Type"), request.headers.get("Content-Encoding")
            response: Any
            # Only very large (or compressed) bodies are decoded off the loop: the parse holds
            # the GIL anyway, and a thread hop per request costs more than it frees the loop.
            off_loop = len(body) > _OFF_LOOP_BYTES or bool(cenc)
            if signal == "traces":
                if off_loop:
                    traces, raw = await asyncio.get_running_loop().run_in_executor(
                        self._pool, _decode_traces, body, ctype, cenc, self._max)
                else:
                    traces, raw = _decode_traces(body, ctype, cenc, self._max)
                result = await consumer.consume_traces(traces, raw)
                response = ExportTraceServiceResponse()
                self._metrics.spans_received.labels(transport="http").inc(result.accepted)
                if result.rejected:
                    response.partial_success.rejected_spans = result.rejected
                    response.partial_success.error_message = result.message
            else:
                if off_loop:
                    logs, _ = await asyncio.get_running_loop().run_in_executor(
                        self._pool, decode_logs, body, ctype, cenc, self._max)
                else:
                    logs, _ = decode_logs(body, ctype, cenc, self._max)
                result = await consumer.consume_logs(logs)
                response = ExportLogsServiceResponse()
                self._metrics.log_records_received.labels(transport="http").inc(result.accepted)
                if result.rejected:
                    response.partial_success.rejected_log_records = result.rejected
                    response.partial_success.error_message = result.message
            return self._reply(200, encode_message(response, encoding), encoding, {})
        except CollectorError as err:
            return self._error(err, encoding)
        except TimeoutError:  # the body did not arrive in time: a client problem
            self._metrics.requests_refused.labels(transport="http", reason="body_timeout").inc()
            logger.debug("OTLP/HTTP body not received within %gs", self._body_timeout)
            return web.Response(status=408, text="request body not received in time\n",
                                headers={"Connection": "close"})
        except (ConnectionError, HttpProcessingError) as err:  # the client went away mid-body
            self._metrics.requests_refused.labels(transport="http", reason="client_disconnected").inc()
            logger.debug("OTLP/HTTP client disconnected: %s", err)
            return web.Response(status=400, text="connection lost\n")
        except Exception as err:  # a bug must not take the listener down
            self._metrics.errors.labels(component="receiver_http").inc()
            logger.exception("OTLP/HTTP request failed")
            return self._error(err, encoding)
        finally:
            if reserved[0]:
                self._budget.release(reserved[0])
                self._memory.after_request(reserved[0])

    def _error(self, err: BaseException, encoding: Encoding) -> web.Response:
        answer = to_http(err)
        reason = type(err).__name__ if isinstance(err, CollectorError) else "internal"
        self._metrics.requests_refused.labels(transport="http", reason=reason).inc()
        if answer.status in (400, 401, 404, 413, 415):
            logger.debug("refused OTLP/HTTP request: %s", err)
        status = status_pb2.Status(code=_GRPC_CODE.get(answer.status, 2), message=str(err)[:1000])
        return self._reply(answer.status, encode_message(status, encoding), encoding, answer.headers)

    @web.middleware
    async def _unknown_path(self, request: web.Request,
                            handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        """Answer a path no route serves with `_not_found` instead of aiohttp's bare "404: Not Found"."""
        try:
            return await handler(request)
        except web.HTTPNotFound:
            return self._not_found(request)

    def _not_found(self, request: web.Request) -> web.Response:
        """The 404 of a path not served: a ``google.rpc.Status`` naming the paths that are, in the
        request's encoding when it is OTLP's (else JSON), with `NOT_FOUND_REASON` as reason phrase."""
        try:
            encoding = media_encoding(request.headers.get("Content-Type"))
        except UnsupportedMediaType:
            encoding = "json"
        served = SERVED if self._consumer is not None else SERVED_BY_WORKER
        response = self._error(UnknownPath(f"no route at {request.method} {request.path}; {served}"), encoding)
        response.set_status(404, NOT_FOUND_REASON if self._consumer is not None else "Not Found (a worker: no OTLP here)")
        return response

    @staticmethod
    def _reply(status: int, body: bytes, encoding: Encoding, headers: dict[str, str]) -> web.Response:
        ctype = PROTOBUF if encoding == "protobuf" else JSON
        return web.Response(status=status, body=body, headers={**headers, "Content-Type": ctype})

    async def _traces(self, request: web.Request) -> web.Response:
        return await self._handle(request, "traces")

    async def _logs(self, request: web.Request) -> web.Response:
        return await self._handle(request, "logs")

    async def _metrics_route(self, request: web.Request) -> web.Response:
        body = await asyncio.to_thread(self._metrics.render, True)  # the process metrics read /proc
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _status_route(self, request: web.Request) -> web.Response:
        try:
            check_bearer(request.headers.get("Authorization"), self._token)
        except Unauthenticated as err:
            return web.json_response({"error": str(err)}, status=401,
                                     headers={"WWW-Authenticate": "Bearer"})
        if self._status is None:  # not routed without one; kept for the type checker
            raise web.HTTPNotFound()
        return web.json_response(await self._status())

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        if self._ready():
            return web.Response(text="ready\n")
        return web.Response(status=503, text="not ready\n")


__all__ = ["HttpReceiver", "InvalidPayload", "check_bearer"]
