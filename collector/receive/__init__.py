"""Receive: OTLP over gRPC and HTTP, in; decoded requests handed to a `TraceConsumer`, out.

The listeners check the bearer token, the content type and the body's size (before and
after decompression), decode protobuf or OTLP/JSON (`decode`), and hand each
``ExportTraceServiceRequest`` / ``ExportLogsServiceRequest`` to the consumer the service
wired (assembly, then forwarding). The consumer's answer (`collector.common.types.Accepted`,
or a `collector.common.errors.CollectorError`) becomes the OTLP response: partial success,
retryable 429/503 and RESOURCE_EXHAUSTED/UNAVAILABLE with a retry delay, or 400.
"""

from collector.receive.consumer import TraceConsumer
from collector.receive.grpc import GrpcReceiver
from collector.receive.http import HttpReceiver

__all__ = ["GrpcReceiver", "HttpReceiver", "TraceConsumer"]
