"""Read saved OTLP requests from files: protobuf or OTLP/JSON, plain or gzip-compressed.

Owned by the adapters (used by ``tracescore inspect`` / ``score``). One file holds one
``ExportTraceServiceRequest`` (or ``ExportLogsServiceRequest`` for ``*.logs.pb`` /
``*.logs.json``). OTLP/JSON spells trace and span ids as hex, where protobuf's JSON
mapping expects base64: ids are rewritten before ``json_format`` parses the document.
Every failure is an `OtlpFileError` naming the file.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import os
import re
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

__all__ = ["OtlpFileError", "is_logs_file", "read_logs_file", "read_trace_file"]

_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"})
_HEX = re.compile(r"^[0-9a-fA-F]*$")
_LOGS_SUFFIXES = (".logs.pb", ".logs.json", ".logs.pb.gz", ".logs.json.gz")


class OtlpFileError(Exception):
    """A file could not be read as an OTLP request; the message names the file and the cause.

    Example:
        >>> str(OtlpFileError("x.pb", "not found"))
        'x.pb: not found'
    """

    def __init__(self, path: str, cause: str) -> None:
        super().__init__(f"{path}: {cause}")
        self.path = path
        self.cause = cause


def is_logs_file(path: str) -> bool:
    """Whether ``path`` names an OTLP logs request by its suffix (``.logs.pb`` / ``.logs.json``, optionally ``.gz``).

    Example:
        >>> (is_logs_file("S1.logs.pb"), is_logs_file("S1.pb"))
        (True, False)
    """
    return str(path).lower().endswith(_LOGS_SUFFIXES)


def _hex_ids_to_base64(node: Any) -> Any:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key in _ID_KEYS and isinstance(value, str):
                out[key] = _id_to_base64(value)
            else:
                out[key] = _hex_ids_to_base64(value)
        return out
    if isinstance(node, list):
        return [_hex_ids_to_base64(v) for v in node]
    return node


def _id_to_base64(value: str) -> str:
    # 32/16 hex digits (or empty) is OTLP/JSON's hex form; anything else is taken as base64.
    if len(value) in (0, 16, 32) and _HEX.match(value):
        return base64.b64encode(bytes.fromhex(value)).decode("ascii")
    return value


def _read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise OtlpFileError(path, exc.strerror or str(exc)) from exc
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, ValueError) as exc:
            raise OtlpFileError(path, f"bad gzip data: {exc}") from exc
    return data


def _json_documents(path: str, data: bytes) -> list[Any]:
    # One OTLP/JSON request, or one per line (the Collector's file exporter writes JSON lines).
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OtlpFileError(path, f"invalid JSON: {exc}") from exc
    try:
        return [json.loads(text)]
    except ValueError as exc:
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) < 2:
            raise OtlpFileError(path, f"invalid JSON: {exc}") from exc
        try:
            return [json.loads(line) for line in lines]
        except ValueError:
            raise OtlpFileError(path, f"invalid JSON: {exc}") from exc


def _parse(path: str, message: Message) -> None:
    data = _read_bytes(path)
    stripped = data.lstrip()
    if not stripped:
        raise OtlpFileError(path, "empty file: no OTLP request in it")
    kind = type(message).__name__
    top = "resourceSpans" if isinstance(message, ExportTraceServiceRequest) else "resourceLogs"
    named_json = path.removesuffix(".gz").endswith(".json")
    if named_json and stripped[:1] not in (b"{", b"["):
        raise OtlpFileError(path, f"not OTLP/JSON: the file does not start with a JSON object ({kind})")
    if stripped[:1] in (b"{", b"["):
        for document in _json_documents(path, stripped):
            if not isinstance(document, dict):
                raise OtlpFileError(path, "OTLP/JSON must be a JSON object")
            snake = "resource_spans" if top == "resourceSpans" else "resource_logs"
            if document and not {top, snake} & document.keys():
                found = ", ".join(sorted(map(str, document))[:5])
                raise OtlpFileError(path, f"not an OTLP/JSON {kind}: no {top!r} (keys: {found})")
            part = type(message)()
            try:
                json_format.ParseDict(_hex_ids_to_base64(document), part, ignore_unknown_fields=True)
            except (json_format.ParseError, binascii.Error, ValueError, TypeError) as exc:
                raise OtlpFileError(path, f"not an OTLP/JSON {type(message).__name__}: {exc}") from exc
            message.MergeFrom(part)
        return
    try:
        message.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise OtlpFileError(path, f"not a protobuf {type(message).__name__}: {exc}") from exc


def read_trace_file(path: str | os.PathLike[str]) -> ExportTraceServiceRequest:
    """Read one ``ExportTraceServiceRequest`` (protobuf or OTLP/JSON, optionally gzip).

    Raises:
        OtlpFileError: the file is missing or is not an OTLP traces request.

    Example:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        ...     _ = fh.write('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId":'
        ...                  ' "0102030405060708090a0b0c0d0e0f10", "spanId": "0102030405060708",'
        ...                  ' "name": "chat", "kind": "SPAN_KIND_CLIENT"}]}]}]}')
        >>> req = read_trace_file(fh.name)
        >>> span = req.resource_spans[0].scope_spans[0].spans[0]
        >>> (span.name, span.trace_id.hex()[:6], span.kind)
        ('chat', '010203', 3)
    """
    request = ExportTraceServiceRequest()
    _parse(os.fspath(path), request)
    return request


def read_logs_file(path: str | os.PathLike[str]) -> ExportLogsServiceRequest:
    """Read one ``ExportLogsServiceRequest`` (protobuf or OTLP/JSON, optionally gzip).

    Raises:
        OtlpFileError: the file is missing or is not an OTLP logs request.

    Example:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile("w", suffix=".logs.json", delete=False) as fh:
        ...     _ = fh.write('{"resourceLogs": [{"scopeLogs": [{"logRecords": [{"traceId":'
        ...                  ' "0102030405060708090a0b0c0d0e0f10", "eventName": "gen_ai.choice"}]}]}]}')
        >>> read_logs_file(fh.name).resource_logs[0].scope_logs[0].log_records[0].event_name
        'gen_ai.choice'
    """
    request = ExportLogsServiceRequest()
    _parse(os.fspath(path), request)
    return request
