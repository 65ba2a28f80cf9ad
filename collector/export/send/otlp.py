"""`OtlpClient`: one OTLP request body to the export endpoint, its answer read by
`collector.export.send.answers` (OTLP/gRPC or OTLP/HTTP protobuf, as ``[export]`` says).

Forwarding passes received requests on unchanged and the score export sends the evaluation
spans it encoded: both hand this client the protobuf encoding of an export request, and get
back an `Answer` (the HTTP status or gRPC status with the backend's message, or no answer:
an outage). Over gRPC the body is sent as it is (the call's serializer is the identity).
"""

from __future__ import annotations

import aiohttp
import grpc

from collector.config import ExportConfig, http_url
from collector.export.send.answers import (
    Answer,
    Verdict,
    classify_error,
    classify_grpc,
    classify_http,
)

GRPC_METHODS = {"traces": "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                "logs": "/opentelemetry.proto.collector.logs.v1.LogsService/Export"}
"""The OTLP/gRPC export method of each signal."""

MAX_REPLY_CHARS = 4096
"""How much of an error reply is read for the backend's message."""


def retry_after_s(value: str | None) -> float | None:
    """The delay, in seconds, a ``Retry-After`` header asks for (None: absent, or not a number of
    seconds, the form OTLP receivers send).

    Example:
        >>> retry_after_s("2"), retry_after_s(None), retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT")
        (2.0, None, None)
    """
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


class OtlpClient:
    """Sends OTLP export request bodies to ``[export] endpoint``.

    Args:
        cfg: the ``[export]`` section (endpoint, protocol, headers, timeout).

    Example:
        >>> import asyncio
        >>> async def closed() -> str:
        ...     return (await OtlpClient(ExportConfig(endpoint="http://127.0.0.1:1")).export("traces", b"")).cause
        >>> asyncio.run(closed())
        'the client is not open'
    """

    def __init__(self, cfg: ExportConfig) -> None:
        self._cfg = cfg
        self._headers = cfg.header_values()
        self._metadata = tuple((k.lower(), v) for k, v in self._headers.items())  # gRPC keys are lowercase
        self._channel: grpc.aio.Channel | None = None
        self._session: aiohttp.ClientSession | None = None

    async def open(self) -> None:
        """Open the channel (gRPC) or HTTP session."""
        if self._cfg.protocol == "grpc":
            target = self._cfg.endpoint.split("://", 1)[-1].rstrip("/")
            if self._cfg.endpoint.startswith("https://"):
                self._channel = grpc.aio.secure_channel(target, grpc.ssl_channel_credentials())
            else:
                self._channel = grpc.aio.insecure_channel(target)
        else:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._cfg.timeout_s))

    async def close(self) -> None:
        """Close it (safe twice)."""
        if self._channel is not None:
            await self._channel.close()
            self._channel = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def export(self, signal: str, body: bytes, *, optional: bool = False) -> Answer:
        """Send one export request of ``signal`` (``traces`` or ``logs``) once.

        ``optional``: the endpoint may not take this signal at all (forwarded logs to a backend
        that takes only traces): an answer saying it has no such route refuses the request for
        good instead of holding everything behind it.
        """
        no_route = Verdict.REFUSE if optional else Verdict.HOLD
        if self._channel is not None:
            return await self._export_grpc(self._channel, signal, body, no_route)
        if self._session is None:
            return Answer(Verdict.RETRY, "the client is not open")
        url = http_url(self._cfg.endpoint, f"/v1/{signal}")
        headers = {**self._headers, "Content-Type": "application/x-protobuf"}
        try:
            async with self._session.post(url, data=body, headers=headers) as resp:
                if 200 <= resp.status < 300:
                    await resp.read()
                    return Answer.sent()
                text = (await resp.content.read(MAX_REPLY_CHARS)).decode("utf-8", "replace")
                return classify_http(resp.status, text, retry_after_s=retry_after_s(resp.headers.get("Retry-After")),
                                     no_route=no_route)
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            return classify_error(err)

    async def _export_grpc(self, channel: grpc.aio.Channel, signal: str, body: bytes, no_route: Verdict) -> Answer:
        export = channel.unary_unary(GRPC_METHODS[signal])  # bytes in, bytes out
        try:
            await export(body, metadata=self._metadata, timeout=self._cfg.timeout_s)
        except grpc.aio.AioRpcError as err:
            return classify_grpc(err.code().name, err.details() or "", no_route=no_route)
        return Answer.sent()
