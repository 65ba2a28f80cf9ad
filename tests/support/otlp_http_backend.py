"""An OTLP/HTTP trace endpoint on loopback (a fake backend at the network boundary): it answers
each ``POST .../v1/traces`` from a script of (status, body) answers, then 200, and keeps the
export requests it accepted (answered 200, by the script or after it)."""

from __future__ import annotations

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from web_app import start_app


class OtlpHttpBackend:
    """See the module docstring. ``script``: the answers to give first, in order."""

    def __init__(self) -> None:
        self.script: list[tuple[int, str]] = []
        self.accepted: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []  # the path of every POST, accepted or not
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self) -> OtlpHttpBackend:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._receive)
        self._runner, self.port = await start_app(app)
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _receive(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.paths.append(request.path)
        status, text = self.script.pop(0) if self.script else (200, "")
        if status != 200:
            return web.Response(status=status, text=text)
        self.accepted.append(ExportTraceServiceRequest.FromString(body))
        return web.Response(body=b"", content_type="application/x-protobuf")

    def spans(self) -> list[Span]:
        """Every span accepted, in arrival order."""
        return [span for req in self.accepted for rs in req.resource_spans for ss in rs.scope_spans
                for span in ss.spans]

    def sizes(self) -> list[int]:
        """How many spans each accepted request carried."""
        return [sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans) for req in self.accepted]
