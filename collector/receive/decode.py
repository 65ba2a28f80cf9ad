"""Decoding of OTLP/HTTP bodies: content type, gzip with a size cap, protobuf or JSON -> proto.

Invariant: no step ever holds more than ``max_bytes`` of decompressed data; a gzip bomb
is refused after inflating at most ``max_bytes + 1`` bytes. OTLP/JSON ids are hex
strings (not base64, unlike protobuf's canonical JSON mapping); they are converted here.
"""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any, Literal, TypeVar

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from collector.common.errors import InvalidPayload, PayloadTooLarge, UnsupportedMediaType

Encoding = Literal["protobuf", "json"]
M = TypeVar("M", bound=Message)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_GZIP_MAGIC = b"\x1f\x8b"
_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"})


def media_encoding(content_type: str | None) -> Encoding:
    """The body encoding named by a Content-Type header.

    Raises:
        UnsupportedMediaType: for anything but OTLP's protobuf and JSON types.

    Example:
        >>> media_encoding("application/json; charset=utf-8")
        'json'
        >>> media_encoding("text/plain")
        Traceback (most recent call last):
        ...
        collector.common.errors.UnsupportedMediaType: unsupported content type 'text/plain'
    """
    base = (content_type or "").split(";", 1)[0].strip().lower()
    if base == PROTOBUF:
        return "protobuf"
    if base == JSON:
        return "json"
    raise UnsupportedMediaType(f"unsupported content type {base!r}")


def decompress(body: bytes, content_encoding: str | None, max_bytes: int) -> bytes:
    """Undo ``gzip`` (or ``deflate``) content encoding, never inflating past ``max_bytes``.

    Every member of a multi-member gzip body is read; bytes after the stream that are
    not another member are refused.

    Raises:
        PayloadTooLarge: when the decompressed body would exceed ``max_bytes``.
        InvalidPayload: when the data is not valid for its encoding.
        UnsupportedMediaType: for an unknown content encoding.

    Example:
        >>> import gzip
        >>> decompress(gzip.compress(b"hello"), "gzip", 100)
        b'hello'
        >>> decompress(gzip.compress(b"x" * 1000), "gzip", 100)
        Traceback (most recent call last):
        ...
        collector.common.errors.PayloadTooLarge: decompressed body exceeds 100 bytes
        >>> decompress(gzip.compress(b"a") + gzip.compress(b"b"), "gzip", 100)
        b'ab'
        >>> decompress(gzip.compress(b"a") + b"junk", "gzip", 100)
        Traceback (most recent call last):
        ...
        collector.common.errors.InvalidPayload: 4 bytes of trailing data after the gzip stream
    """
    encoding = (content_encoding or "identity").strip().lower()
    if encoding in ("", "identity"):
        if len(body) > max_bytes:
            raise PayloadTooLarge(f"body exceeds {max_bytes} bytes")
        return body
    if encoding == "gzip":
        wbits = 16 + zlib.MAX_WBITS
    elif encoding == "deflate":
        wbits = zlib.MAX_WBITS
    else:
        raise UnsupportedMediaType(f"unsupported content encoding {encoding!r}")
    out = bytearray()
    rest = body
    while True:  # one gzip member per turn (RFC 1952: a gzip file is a series of members)
        inflater = zlib.decompressobj(wbits)
        try:
            out += inflater.decompress(rest, max_bytes + 1 - len(out))
            if len(out) > max_bytes or inflater.unconsumed_tail:
                raise PayloadTooLarge(f"decompressed body exceeds {max_bytes} bytes")
            out += inflater.flush()
        except zlib.error as err:
            raise InvalidPayload(f"body is not valid {encoding} data: {err}") from None
        if len(out) > max_bytes:
            raise PayloadTooLarge(f"decompressed body exceeds {max_bytes} bytes")
        if not inflater.eof:
            raise InvalidPayload(f"truncated {encoding} body")
        rest = inflater.unused_data
        if not rest:
            return bytes(out)
        if encoding != "gzip" or rest[:2] != _GZIP_MAGIC:
            raise InvalidPayload(f"{len(rest)} bytes of trailing data after the {encoding} stream")


def _hex_ids_to_base64(node: Any) -> Any:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key in _ID_KEYS and isinstance(value, str) and value:
                try:
                    value = base64.b64encode(bytes.fromhex(value)).decode("ascii")
                except ValueError:
                    raise InvalidPayload(f"{key} is not a hex string: {value[:40]!r}") from None
            else:
                value = _hex_ids_to_base64(value)
            out[key] = value
        return out
    if isinstance(node, list):
        return [_hex_ids_to_base64(v) for v in node]
    return node


def parse_message(data: bytes, encoding: Encoding, message_type: type[M]) -> M:
    """Parse a protobuf or OTLP/JSON body into ``message_type``.

    Raises:
        InvalidPayload: when the body does not parse.

    Example:
        >>> req = parse_message(b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId":'
        ...     b' "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "name": "s"}]}]}]}',
        ...     "json", ExportTraceServiceRequest)
        >>> req.resource_spans[0].scope_spans[0].spans[0].trace_id.hex()
        '5b8efff798038103d269b633813fc60c'
    """
    # The body is the client's: whatever a parser raises on it is the client's error (400),
    # never an internal one; messages are cut short (they quote the body).
    message = message_type()
    if encoding == "protobuf":
        try:
            message.ParseFromString(data)
        except (DecodeError, ValueError, RecursionError) as err:
            raise InvalidPayload(f"body is not a valid protobuf {message_type.__name__}: {_short(err)}") from None
        return message
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError) as err:
        raise InvalidPayload(f"body is not valid JSON: {_short(err)}") from None
    except RecursionError:
        raise InvalidPayload("body is not valid OTLP/JSON: nested too deeply") from None
    if not isinstance(document, dict):
        raise InvalidPayload("body is not a JSON object")
    try:
        json_format.ParseDict(_hex_ids_to_base64(document), message, ignore_unknown_fields=True)
    except InvalidPayload:
        raise
    except RecursionError:
        raise InvalidPayload("body is not valid OTLP/JSON: nested too deeply") from None
    except Exception as err:  # ParseError, ValueError, OverflowError, SystemError (lone surrogates)...
        raise InvalidPayload(f"body is not valid OTLP/JSON: {_short(err)}") from None
    return message


def _short(err: BaseException, limit: int = 200) -> str:
    """An error's message cut to ``limit`` characters (it may quote the body)."""
    text = str(err) or type(err).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def encode_message(message: Message, encoding: Encoding) -> bytes:
    """Serialize a response in the request's encoding.

    Example:
        >>> encode_message(ExportTraceServiceResponse(), "json")
        b'{}'
    """
    if encoding == "protobuf":
        return message.SerializeToString()
    return json_format.MessageToJson(message, indent=None).encode("utf-8")


def decode_traces(
    body: bytes, content_type: str | None, content_encoding: str | None, max_bytes: int
) -> tuple[ExportTraceServiceRequest, Encoding]:
    """Decode an OTLP/HTTP ``/v1/traces`` body.

    Example:
        >>> req, enc = decode_traces(ExportTraceServiceRequest().SerializeToString(),
        ...     "application/x-protobuf", None, 1024)
        >>> (len(req.resource_spans), enc)
        (0, 'protobuf')
    """
    encoding = media_encoding(content_type)
    data = decompress(body, content_encoding, max_bytes)
    return parse_message(data, encoding, ExportTraceServiceRequest), encoding


def decode_logs(
    body: bytes, content_type: str | None, content_encoding: str | None, max_bytes: int
) -> tuple[ExportLogsServiceRequest, Encoding]:
    """Decode an OTLP/HTTP ``/v1/logs`` body.

    Example:
        >>> req, enc = decode_logs(b"{}", "application/json", None, 1024)
        >>> (len(req.resource_logs), enc)
        (0, 'json')
    """
    encoding = media_encoding(content_type)
    data = decompress(body, content_encoding, max_bytes)
    return parse_message(data, encoding, ExportLogsServiceRequest), encoding


__all__ = [
    "ExportLogsServiceResponse",
    "ExportTraceServiceResponse",
    "decode_logs",
    "decode_traces",
    "decompress",
    "encode_message",
    "media_encoding",
    "parse_message",
]
