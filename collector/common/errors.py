"""Errors of the daemon and the one place that maps them onto OTLP/HTTP and OTLP/gRPC codes.

Tree::

    CollectorError              base; retryable unless it is a PermanentError
    ├── ConfigError             bad configuration (raised at start, names the key path)
    ├── QueueFull               the daemon is full: a retryable refusal with retry_after_s
    ├── Unavailable             shutting down or not ready: retryable
    │   └── StorageFault        the store cannot write (a full disk, an I/O error): 503, retryable
    ├── UnreadableTrace         a buffered trace cannot be read back (dead-lettered alone)
    └── PermanentError          the request can never succeed as sent
        ├── InvalidPayload      malformed body (400 / INVALID_ARGUMENT)
        ├── PayloadTooLarge     body or decompressed body over the limit (413 / RESOURCE_EXHAUSTED)
        ├── UnsupportedMediaType unknown content type or encoding (415 / INVALID_ARGUMENT)
        ├── Unauthenticated     missing or wrong bearer token (401 / UNAUTHENTICATED)
        ├── UnknownPath         no route at the request's HTTP path (404)
        └── PullError           a backend read by ``score --from`` refused or garbled a request
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by to_grpc: loading or checking a configuration needs no gRPC
    import grpc


class CollectorError(Exception):
    """Base of every daemon error; retryable unless it is a `PermanentError`.

    Example:
        >>> isinstance(QueueFull("full"), CollectorError)
        True
    """

    retryable = True


class ConfigError(CollectorError):
    """The configuration is invalid; the message names the key path.

    Example:
        >>> str(ConfigError("receiver.nope: unknown key"))
        'receiver.nope: unknown key'
    """

    retryable = False


class QueueFull(CollectorError):
    """The buffers or the job queue are full; the client should retry after ``retry_after_s``.

    Example:
        >>> QueueFull("too many pending jobs", retry_after_s=2.0).retry_after_s
        2.0
    """

    def __init__(self, message: str, *, retry_after_s: float = 5.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


def forward_backlog_full(held: int, limit: int, retry_after_s: float) -> QueueFull:
    """The refusal of a request that would take the forward backlog (held bytes) over its limit.

    Example:
        >>> err = forward_backlog_full(900, 1000, 2.0)
        >>> str(err), err.retry_after_s
        ('the forward backlog is full (900 of export.max_forward_backlog_bytes = 1000 bytes): the export endpoint is down or not keeping up', 2.0)
    """
    return QueueFull(f"the forward backlog is full ({held} of export.max_forward_backlog_bytes = {limit} bytes):"
                     " the export endpoint is down or not keeping up", retry_after_s=retry_after_s)


class Unavailable(CollectorError):
    """The daemon cannot take data right now (starting or draining).

    Example:
        >>> Unavailable("draining").retryable
        True
    """


class StorageFault(Unavailable):
    """The store cannot write right now (ENOSPC, EIO): refused retryably, nothing half-written.

    Example:
        >>> StorageFault("disk full").retryable, to_http(StorageFault("disk full")).status
        (True, 503)
    """


class UnreadableTrace(CollectorError):
    """A buffered trace cannot be read back (its stored bytes are missing or corrupt).

    Assembly dead-letters such a trace alone, with this error, and decides the others.

    Example:
        >>> UnreadableTrace(b"\x01" * 16, "short read").trace_id.hex()[:4]
        '0101'
    """

    retryable = False

    def __init__(self, trace_id: bytes, message: str) -> None:
        super().__init__(f"trace {trace_id.hex()} cannot be read: {message}")
        self.trace_id = trace_id


class PermanentError(CollectorError):
    """A request that will never succeed as sent; never retried.

    Example:
        >>> InvalidPayload("bad protobuf").retryable
        False
    """

    retryable = False


class InvalidPayload(PermanentError):
    """The body is not a valid OTLP request.

    Example:
        >>> str(InvalidPayload("bad"))
        'bad'
    """


class PayloadTooLarge(PermanentError):
    """The body, or its decompressed form, exceeds ``max_body_bytes``.

    Example:
        >>> str(PayloadTooLarge("over 10 bytes"))
        'over 10 bytes'
    """


class UnsupportedMediaType(PermanentError):
    """The content type or content encoding is not one OTLP defines.

    Example:
        >>> str(UnsupportedMediaType("text/plain"))
        'text/plain'
    """


class Unauthenticated(PermanentError):
    """The bearer token is missing or wrong.

    Example:
        >>> str(Unauthenticated("missing bearer token"))
        'missing bearer token'
    """


class UnknownPath(PermanentError):
    """The request's path is not one the listener serves (an exporter's endpoint misspelt).

    Example:
        >>> to_http(UnknownPath("no route at POST /v1/trace")).status
        404
    """


@dataclass(frozen=True)
class HttpStatus:
    """An HTTP answer for an error: status code and extra headers.

    Example:
        >>> HttpStatus(429, {"Retry-After": "5"}).status
        429
    """

    status: int
    headers: dict[str, str]


def to_http(err: BaseException) -> HttpStatus:
    """Map an error onto the OTLP/HTTP status code (and Retry-After for refusals).

    Example:
        >>> to_http(QueueFull("full", retry_after_s=2.5))
        HttpStatus(status=429, headers={'Retry-After': '3'})
        >>> to_http(InvalidPayload("x")).status, to_http(RuntimeError("bug")).status
        (400, 500)
    """
    if isinstance(err, QueueFull):
        return HttpStatus(429, {"Retry-After": str(max(1, round(err.retry_after_s + 0.49)))})
    if isinstance(err, Unavailable):
        return HttpStatus(503, {"Retry-After": "5"})
    if isinstance(err, PayloadTooLarge):
        return HttpStatus(413, {})
    if isinstance(err, UnsupportedMediaType):
        return HttpStatus(415, {})
    if isinstance(err, Unauthenticated):
        return HttpStatus(401, {"WWW-Authenticate": "Bearer"})
    if isinstance(err, InvalidPayload):
        return HttpStatus(400, {})
    if isinstance(err, UnknownPath):
        return HttpStatus(404, {})
    return HttpStatus(500, {})


def to_grpc(err: BaseException) -> grpc.StatusCode:
    """Map an error onto the OTLP/gRPC status code.

    Example:
        >>> to_grpc(QueueFull("full")).name, to_grpc(Unauthenticated("x")).name
        ('RESOURCE_EXHAUSTED', 'UNAUTHENTICATED')
    """
    import grpc

    if isinstance(err, QueueFull):
        return grpc.StatusCode.RESOURCE_EXHAUSTED
    if isinstance(err, Unavailable):
        return grpc.StatusCode.UNAVAILABLE
    if isinstance(err, PayloadTooLarge):
        return grpc.StatusCode.RESOURCE_EXHAUSTED
    if isinstance(err, Unauthenticated):
        return grpc.StatusCode.UNAUTHENTICATED
    if isinstance(err, (InvalidPayload, UnsupportedMediaType)):
        return grpc.StatusCode.INVALID_ARGUMENT
    return grpc.StatusCode.INTERNAL


def grpc_retry_info(err: BaseException) -> tuple[tuple[str, bytes], ...]:
    """Trailing metadata carrying a ``google.rpc.RetryInfo`` for retryable refusals.

    Example:
        >>> grpc_retry_info(QueueFull("full", retry_after_s=1.5))[0][0]
        'google.rpc.retryinfo-bin'
        >>> grpc_retry_info(InvalidPayload("x"))
        ()
    """
    if not isinstance(err, (QueueFull, Unavailable)):
        return ()
    from google.protobuf.duration_pb2 import Duration
    from google.rpc.error_details_pb2 import RetryInfo

    delay = err.retry_after_s if isinstance(err, QueueFull) else 5.0
    info = RetryInfo(retry_delay=Duration(seconds=int(delay), nanos=int((delay % 1) * 1e9)))
    return (("google.rpc.retryinfo-bin", info.SerializeToString()),)


class PullError(PermanentError):
    """``tracescore score --from``: the backend cannot give what was asked (an unknown project
    or experiment, refused credentials, an answer that is not what its API returns, or still
    failing after the retries). The message is one line naming the URL, secrets masked.

    ``status`` is the HTTP status the backend refused with (None: no answer, or an answer that
    is not what its API returns), for a reader that falls back on another endpoint.

    Example:
        >>> err = PullError("http://127.0.0.1:6006/v1/projects/nope: HTTP 404: project not found", status=404)
        >>> str(err), err.status
        ('http://127.0.0.1:6006/v1/projects/nope: HTTP 404: project not found', 404)
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
