"""OTLP/gRPC receiver: ``TraceService/Export`` and ``LogsService/Export`` on ``grpc.aio``.

gRPC handles gzip itself; ``max_receive_message_length`` (= ``max_body_bytes``) bounds
the message, also after decompression. The bearer token is checked by a server
interceptor on the call's metadata, before the message is read: a call without the
token is refused by a handler that never reads its request, so an unauthenticated 16 MiB
message costs no memory. The message itself is read only once it has room in the body
budget shared with the HTTP listener (`collector.receive.memory`): the handlers are
registered as client-streaming, so gRPC does not read the message before they run; a call
holds ``max_body_bytes`` of the budget until its message is read, then the message's size
until it is stored. A call that finds no room within ``admit_wait_s`` is refused with
RESOURCE_EXHAUSTED and a retry delay. Until then its message waits in the client: BDP
probing is off, so the transport's flow-control window for a message nobody reads stays
at its initial size (64 KiB) instead of growing to the whole message. A message must arrive within
``body_timeout_s`` of being asked for (else DEADLINE_EXCEEDED). Connections are capped
(``grpc.max_allowed_incoming_connections``), must finish their handshake within the
header timeout and are closed when idle for the keep-alive timeout. Requests are parsed here (large ones off the
loop); a body that is not a valid request is INVALID_ARGUMENT. Refusals carry the code from `collector.common.errors.to_grpc`, and retryable ones
a ``google.rpc.RetryInfo`` in the trailing metadata, as the OTLP exporters expect.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from collector.common.errors import (
    CollectorError,
    InvalidPayload,
    Unauthenticated,
    grpc_retry_info,
    to_grpc,
)
from collector.common.metrics import Metrics
from collector.receive.consumer import TraceConsumer
from collector.receive.decode import parse_message
from collector.receive.http import check_bearer
from collector.receive.memory import BodyBudget, MemoryReturner, Reservation

logger = logging.getLogger(__name__)
M = TypeVar("M", bound=Message)
_TRACE_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
_LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"


class MessageLate(Exception):
    """A call's request message did not arrive within ``body_timeout_s`` (DEADLINE_EXCEEDED)."""


class _Service:
    def __init__(self, receiver: GrpcReceiver) -> None:
        self._r = receiver

    async def _guard(self, context: grpc.aio.ServicerContext, fn: Any) -> Any:
        # gRPC keeps the abort's exception in a reference cycle with the call's state, freed
        # only when the garbage collector runs: so the call is aborted outside the ``except``
        # blocks (inside one, the caught error and the frames of its traceback, which hold the
        # request, would be chained to it), and the message's bytes are locals of ``fn`` alone,
        # never of a frame the abort passes through.
        try:
            return await fn()
        except CollectorError as err:
            code, message = to_grpc(err), str(err)[:1000]
            self._r.metrics.requests_refused.labels(transport="grpc", reason=type(err).__name__).inc()
            context.set_trailing_metadata(grpc_retry_info(err))
        except MessageLate as err:
            code, message = grpc.StatusCode.DEADLINE_EXCEEDED, str(err)
            self._r.metrics.requests_refused.labels(transport="grpc", reason="body_timeout").inc()
        except Exception as err:  # a bug must not take the listener down
            code, message = grpc.StatusCode.INTERNAL, f"internal error: {type(err).__name__}"
            self._r.metrics.errors.labels(component="receiver_grpc").inc()
            logger.exception("OTLP/gRPC request failed")
        await context.abort(code, message)


class _BearerAuth(grpc.aio.ServerInterceptor):
    """Refuses calls without the bearer token from their metadata, before the message is read."""

    def __init__(self, token: str, metrics: Metrics) -> None:
        self._token = token
        self._metrics = metrics
        # A client-streaming handler: it answers without ever reading the request message.
        self._deny = grpc.stream_unary_rpc_method_handler(self._refuse)

    async def _refuse(self, requests: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid bearer token")

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        metadata = dict(handler_call_details.invocation_metadata or ())  # type: ignore[attr-defined]
        header = metadata.get("authorization")
        try:
            check_bearer(header if isinstance(header, str) else None, self._token)
        except Unauthenticated:
            self._metrics.requests_refused.labels(transport="grpc", reason="Unauthenticated").inc()
            return self._deny
        return await continuation(handler_call_details)


async def _parse(pool: ThreadPoolExecutor, data: bytes, message_type: type[M]) -> M:
    # Requests arrive as bytes (no deserializer registered): large ones are parsed off the loop,
    # on the receiver's own threads (the default executor runs user scorers' sync steps).
    if len(data) > 256 * 1024:
        return await asyncio.get_running_loop().run_in_executor(
            pool, parse_message, data, "protobuf", message_type)
    return parse_message(data, "protobuf", message_type)


class _TraceService(_Service):
    async def export(
        self, requests: object, context: grpc.aio.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        async def work() -> trace_service_pb2.ExportTraceServiceResponse:
            async with self._r.admitted(context) as held:
                data = await self._r.read_message(context, held)
                request = await _parse(self._r.pool, data, trace_service_pb2.ExportTraceServiceRequest)
                result = await self._r.consumer.consume_traces(request, data)
                del request, data  # not kept while the answer is sent
            self._r.metrics.spans_received.labels(transport="grpc").inc(result.accepted)
            response = trace_service_pb2.ExportTraceServiceResponse()
            if result.rejected:
                response.partial_success.rejected_spans = result.rejected
                response.partial_success.error_message = result.message
            return response

        answer: trace_service_pb2.ExportTraceServiceResponse = await self._guard(context, work)
        return answer


class _LogsService(_Service):
    async def export(
        self, requests: object, context: grpc.aio.ServicerContext
    ) -> logs_service_pb2.ExportLogsServiceResponse:
        async def work() -> logs_service_pb2.ExportLogsServiceResponse:
            async with self._r.admitted(context) as held:
                data = await self._r.read_message(context, held)
                request = await _parse(self._r.pool, data, logs_service_pb2.ExportLogsServiceRequest)
                result = await self._r.consumer.consume_logs(request)
                del request, data
            self._r.metrics.log_records_received.labels(transport="grpc").inc(result.accepted)
            response = logs_service_pb2.ExportLogsServiceResponse()
            if result.rejected:
                response.partial_success.rejected_log_records = result.rejected
                response.partial_success.error_message = result.message
            return response

        answer: logs_service_pb2.ExportLogsServiceResponse = await self._guard(context, work)
        return answer


def _taken(endpoint: str) -> OSError:
    """The error of a listen address that cannot be bound."""
    return OSError(f"cannot listen on {endpoint} (gRPC): the port is in use or not available")


def _refuse_taken_port(endpoint: str) -> None:
    """Raise `_taken` when another socket listens on the port at any address ``endpoint``'s
    host resolves to.

    gRPC binds a name (``localhost``) to each of its addresses and is content when one of
    them binds: a daemon would then listen on ``::1`` only while another process holds
    ``127.0.0.1``, and agents would reach that one. Port 0 and names that do not resolve are
    left to gRPC.
    """
    host, _, port = endpoint.rpartition(":")
    if not port.isdigit() or int(port) == 0:
        return
    try:
        addresses = socket.getaddrinfo(host.strip("[]"), int(port), type=socket.SOCK_STREAM,
                                       flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError):
        return
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC: TIME_WAIT is no owner
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(address)
            except OSError as err:
                if err.errno == errno.EADDRINUSE:
                    raise _taken(endpoint) from err


class GrpcReceiver:
    """The OTLP/gRPC listener.

    Args:
        endpoint: ``HOST:PORT`` (port 0 picks a free one; see `port`).
        consumer: where requests go.
        metrics: the service's instruments.
        token: the bearer token required in ``authorization`` metadata, or None.
        max_body_bytes: the largest message accepted (after decompression).
        tls: (certificate chain, private key) PEM bytes to serve TLS, or None.
        max_connections: open connections at most.
        header_timeout_s: a connection must finish its handshake within this.
        keepalive_timeout_s: a connection idle this long is closed.
        budget: the body bytes in flight, shared with the HTTP listener (default: its own).
        body_timeout_s: a call's message must arrive within this once it is asked for.
        admit_wait_s: a call waits this long at most for room in the budget (then
            RESOURCE_EXHAUSTED with the budget's retry delay).

    Example:
        >>> GrpcReceiver("127.0.0.1:4317", None, Metrics()).port  # type: ignore[arg-type]
        4317
    """

    def __init__(
        self, endpoint: str, consumer: TraceConsumer, metrics: Metrics, *, token: str | None = None,
        max_body_bytes: int = 16 * 1024 * 1024, tls: tuple[bytes, bytes] | None = None,
        max_connections: int = 1000, header_timeout_s: float = 10.0, keepalive_timeout_s: float = 60.0,
        budget: BodyBudget | None = None, body_timeout_s: float = 60.0, admit_wait_s: float = 2.0,
    ) -> None:
        self.endpoint = endpoint
        self._limits = (max_connections, header_timeout_s, keepalive_timeout_s)
        self._body_timeout = body_timeout_s
        self._admit_wait = admit_wait_s
        self._budget = budget or BodyBudget(4 * max_body_bytes)
        self._memory = MemoryReturner()
        self._tls = tls
        self.consumer = consumer
        self.metrics = metrics
        self.token = token
        self._max = max_body_bytes
        self._port = int(endpoint.rpartition(":")[2])
        self._server: grpc.aio.Server | None = None
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tracescore-grpc-decode")

    @property
    def port(self) -> int:
        """The port to give clients: the configured one, and after `start` the bound one
        (a free port picked by the kernel when the endpoint's port is 0).

        Example:
            >>> async def bound() -> tuple[int, int]:
            ...     receiver = GrpcReceiver("127.0.0.1:0", None, Metrics())  # type: ignore[arg-type]
            ...     before = receiver.port
            ...     await receiver.start()
            ...     await receiver.shutdown(0)
            ...     return before, receiver.port
            >>> before, after = asyncio.run(bound())
            >>> before, 1024 <= after <= 65535
            (0, True)
        """
        return self._port

    @contextlib.asynccontextmanager
    async def admitted(self, context: grpc.aio.ServicerContext) -> AsyncIterator[Reservation]:
        """Hold room in the body budget for a call's message while it is read, decoded and
        stored: ``max_body_bytes`` until `read_message` knows its size, then that size.
        Waits up to ``admit_wait_s`` (less when the call's deadline is nearer) for room.

        Raises:
            QueueFull: no room came in time (RESOURCE_EXHAUSTED with a retry delay).
        """
        remaining = context.time_remaining()
        wait_s = self._admit_wait if remaining is None else max(0.0, min(self._admit_wait, remaining / 2))
        held = self._budget.hold(self._max, wait_s)
        async with held:
            try:
                yield held
            finally:
                self._memory.after_request(held.size)

    async def read_message(self, context: grpc.aio.ServicerContext, held: Reservation) -> bytes:
        """The call's request message (its one message), read within ``body_timeout_s``;
        ``held`` is settled to its size.

        Raises:
            InvalidPayload: the call carried no message.
            MessageLate: the message did not arrive in time.
        """
        try:
            async with asyncio.timeout(self._body_timeout):
                message = await context.read()
        except TimeoutError:
            raise MessageLate(f"request message not received within {self._body_timeout:g} s") from None
        if message is grpc.aio.EOF:
            raise InvalidPayload("the call carried no request message")
        data = message if isinstance(message, bytes) else bytes(message)
        held.settle(len(data))
        return data

    async def start(self) -> None:
        """Bind and serve; the port is never shared (``SO_REUSEPORT``, gRPC's default, is off).

        Raises:
            OSError: the port cannot be bound on an address the endpoint names (another
                process listens there), naming the endpoint.
        """
        await asyncio.to_thread(_refuse_taken_port, self.endpoint)  # resolves the host: off the loop
        max_connections, header_timeout_s, keepalive_timeout_s = self._limits
        interceptors = [_BearerAuth(self.token, self.metrics)] if self.token else []
        server = grpc.aio.server(interceptors=interceptors, options=[
            ("grpc.max_receive_message_length", self._max),
            ("grpc.max_send_message_length", 4 * 1024 * 1024),
            ("grpc.max_allowed_incoming_connections", max_connections),
            ("grpc.server_handshake_timeout_ms", int(header_timeout_s * 1000)),
            ("grpc.max_connection_idle_ms", int(keepalive_timeout_s * 1000)),
            ("grpc.so_reuseport", 0),  # a second daemon on this port must fail, not split the clients
            # Without BDP probing a stream's window stays at 64 KiB until its message is read
            # (then it opens to the message's size): messages waiting for room in the body
            # budget stay in their clients instead of in this process.
            ("grpc.http2.bdp_probe", 0),
        ])
        server.add_generic_rpc_handlers((
            # Client-streaming handlers for the unary methods: the message is read by the
            # handler once admitted, not by gRPC before the handler runs.
            grpc.method_handlers_generic_handler(_TRACE_SERVICE, {"Export": grpc.stream_unary_rpc_method_handler(
                _TraceService(self).export,
                response_serializer=trace_service_pb2.ExportTraceServiceResponse.SerializeToString)}),
            grpc.method_handlers_generic_handler(_LOGS_SERVICE, {"Export": grpc.stream_unary_rpc_method_handler(
                _LogsService(self).export,
                response_serializer=logs_service_pb2.ExportLogsServiceResponse.SerializeToString)}),
        ))
        cause: RuntimeError | None = None
        try:  # no address bound: grpcio raises RuntimeError (1.85), or returns port 0 (some releases)
            if self._tls is not None:
                creds = grpc.ssl_server_credentials([(self._tls[1], self._tls[0])])
                port = server.add_secure_port(self.endpoint, creds)
            else:
                port = server.add_insecure_port(self.endpoint)
        except RuntimeError as err:
            port, cause = 0, err
        if not port:
            await server.stop(None)
            raise _taken(self.endpoint) from cause
        self._port = port
        await server.start()
        self._server = server
        logger.info("OTLP/gRPC receiver listening on %s", self.endpoint.rpartition(":")[0] + f":{self._port}")

    async def shutdown(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 (lifecycle contract)
        """Stop accepting calls, let running ones finish for ``timeout`` s; safe twice."""
        self._memory.cancel()
        if self._server is not None:
            await self._server.stop(grace=timeout)
            self._server = None
            await asyncio.to_thread(self.pool.shutdown, True)
