"""OTLP/gRPC receiver: ``TraceService/Export`` and ``LogsService/Export`` on ``grpc.aio``.

gRPC handles gzip itself; ``max_receive_message_length`` (= ``max_body_bytes``) bounds
the message, also after decompression. Requests are parsed here (large ones off the
loop); a body that is not a valid request is INVALID_ARGUMENT. Refusals carry the code from `collector.errors.to_grpc`, and retryable ones
a ``google.rpc.RetryInfo`` in the trailing metadata, as the OTLP exporters expect.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from collector.errors import CollectorError, grpc_retry_info, to_grpc
from collector.metrics import Metrics
from collector.receive.consumer import TraceConsumer
from collector.receive.decode import parse_message
from collector.receive.http import check_bearer

logger = logging.getLogger(__name__)
M = TypeVar("M", bound=Message)
_TRACE_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
_LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"


class _Service:
    def __init__(self, receiver: GrpcReceiver) -> None:
        self._r = receiver

    async def _guard(self, context: grpc.aio.ServicerContext, fn: Any) -> Any:
        try:
            metadata = dict(context.invocation_metadata() or ())
            header = metadata.get("authorization")
            check_bearer(header if isinstance(header, str) else None, self._r.token)
            return await fn()
        except CollectorError as err:
            code = to_grpc(err)
            self._r.metrics.requests_refused.labels(transport="grpc", reason=type(err).__name__).inc()
            context.set_trailing_metadata(grpc_retry_info(err))
            await context.abort(code, str(err)[:1000])
        except Exception as err:  # a bug must not take the listener down
            self._r.metrics.errors.labels(component="receiver_grpc").inc()
            logger.exception("OTLP/gRPC request failed")
            await context.abort(grpc.StatusCode.INTERNAL, f"internal error: {type(err).__name__}")


async def _parse(pool: ThreadPoolExecutor, data: bytes, message_type: type[M]) -> M:
    # Requests arrive as bytes (no deserializer registered): large ones are parsed off the loop,
    # on the receiver's own threads (the default executor runs user scorers' sync steps).
    if len(data) > 256 * 1024:
        return await asyncio.get_running_loop().run_in_executor(
            pool, parse_message, data, "protobuf", message_type)
    return parse_message(data, "protobuf", message_type)


class _TraceService(_Service):
    async def export(
        self, data: bytes, context: grpc.aio.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        async def work() -> trace_service_pb2.ExportTraceServiceResponse:
            request = await _parse(self._r.pool, data, trace_service_pb2.ExportTraceServiceRequest)
            result = await self._r.consumer.consume_traces(request, data)
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
        self, data: bytes, context: grpc.aio.ServicerContext
    ) -> logs_service_pb2.ExportLogsServiceResponse:
        async def work() -> logs_service_pb2.ExportLogsServiceResponse:
            request = await _parse(self._r.pool, data, logs_service_pb2.ExportLogsServiceRequest)
            result = await self._r.consumer.consume_logs(request)
            self._r.metrics.log_records_received.labels(transport="grpc").inc(result.accepted)
            response = logs_service_pb2.ExportLogsServiceResponse()
            if result.rejected:
                response.partial_success.rejected_log_records = result.rejected
                response.partial_success.error_message = result.message
            return response

        answer: logs_service_pb2.ExportLogsServiceResponse = await self._guard(context, work)
        return answer


class GrpcReceiver:
    """The OTLP/gRPC listener.

    Args:
        endpoint: ``HOST:PORT`` (port 0 picks a free one; see `port`).
        consumer: where requests go.
        metrics: the service's instruments.
        token: the bearer token required in ``authorization`` metadata, or None.
        max_body_bytes: the largest message accepted (after decompression).
        tls: (certificate chain, private key) PEM bytes to serve TLS, or None.

    Example:
        >>> GrpcReceiver("127.0.0.1:4317", None, Metrics()).port  # type: ignore[arg-type]
        4317
    """

    def __init__(
        self, endpoint: str, consumer: TraceConsumer, metrics: Metrics, *, token: str | None = None,
        max_body_bytes: int = 16 * 1024 * 1024, tls: tuple[bytes, bytes] | None = None,
    ) -> None:
        self.endpoint = endpoint
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
        """The bound port (after `start`).

        Example:
            >>> GrpcReceiver.port.__doc__.split(" (")[0]
            'The bound port'
        """
        return self._port

    async def start(self) -> None:
        """Bind and serve.
        """
        server = grpc.aio.server(options=[
            ("grpc.max_receive_message_length", self._max),
            ("grpc.max_send_message_length", 4 * 1024 * 1024),
        ])
        server.add_generic_rpc_handlers((
            grpc.method_handlers_generic_handler(_TRACE_SERVICE, {"Export": grpc.unary_unary_rpc_method_handler(
                _TraceService(self).export,
                response_serializer=trace_service_pb2.ExportTraceServiceResponse.SerializeToString)}),
            grpc.method_handlers_generic_handler(_LOGS_SERVICE, {"Export": grpc.unary_unary_rpc_method_handler(
                _LogsService(self).export,
                response_serializer=logs_service_pb2.ExportLogsServiceResponse.SerializeToString)}),
        ))
        if self._tls is not None:
            creds = grpc.ssl_server_credentials([(self._tls[1], self._tls[0])])
            self._port = server.add_secure_port(self.endpoint, creds)
        else:
            self._port = server.add_insecure_port(self.endpoint)
        await server.start()
        self._server = server
        logger.info("OTLP/gRPC receiver listening on %s", self.endpoint.rpartition(":")[0] + f":{self._port}")

    async def shutdown(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 (lifecycle contract)
        """Stop accepting calls, let running ones finish for ``timeout`` s; safe twice.
        """
        if self._server is not None:
            await self._server.stop(grace=timeout)
            self._server = None
            await asyncio.to_thread(self.pool.shutdown, True)
