"""Both OTLP receivers on real loopback sockets, with a recording consumer behind them."""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator

import aiohttp
import grpc
import pytest
from google.rpc import status_pb2
from google.rpc.error_details_pb2 import RetryInfo
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from collector.common.errors import CollectorError, QueueFull
from collector.common.metrics import Metrics
from collector.receive.consumer import Accepted
from collector.receive.grpc import GrpcReceiver
from collector.receive.http import HttpReceiver

TOKEN = "t0ken"
MAX = 64 * 1024


class Recorder:
    """A TraceConsumer at the receiver boundary: records requests or refuses them."""

    def __init__(self) -> None:
        self.traces: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.logs: list[logs_service_pb2.ExportLogsServiceRequest] = []
        self.raws: list[bytes | None] = []
        self.refuse: CollectorError | None = None
        self.rejected = 0

    async def consume_traces(self, request: trace_service_pb2.ExportTraceServiceRequest, raw: bytes | None = None) -> Accepted:
        if self.refuse is not None:
            raise self.refuse
        self.traces.append(request)
        self.raws.append(raw)
        n = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        return Accepted(n - self.rejected, self.rejected, "bad ids" if self.rejected else "")

    async def consume_logs(self, request: logs_service_pb2.ExportLogsServiceRequest) -> Accepted:
        self.logs.append(request)
        return Accepted(1)


def _request(n: int = 1) -> trace_service_pb2.ExportTraceServiceRequest:
    spans = [Span(trace_id=b"\x01" * 16, span_id=(i + 1).to_bytes(8, "big"), name=f"s{i}") for i in range(n)]
    return trace_service_pb2.ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])])


@pytest.fixture
async def http() -> AsyncIterator[tuple[str, Recorder, aiohttp.ClientSession]]:
    rec = Recorder()
    receiver = HttpReceiver("127.0.0.1:0", rec, Metrics(), token=TOKEN, max_body_bytes=MAX)
    await receiver.start()
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        yield f"http://127.0.0.1:{receiver.port}", rec, session
    await receiver.shutdown()
    await receiver.shutdown()


AUTH = {"Authorization": f"Bearer {TOKEN}"}
PB = {**AUTH, "Content-Type": "application/x-protobuf"}


async def test_http_protobuf_json_gzip(http: tuple[str, Recorder, aiohttp.ClientSession]) -> None:
    url, rec, session = http
    body = _request().SerializeToString()
    async with session.post(f"{url}/v1/traces", data=body, headers=PB) as resp:
        assert resp.status == 200 and resp.content_type == "application/x-protobuf"
        assert trace_service_pb2.ExportTraceServiceResponse.FromString(await resp.read()) == (
            trace_service_pb2.ExportTraceServiceResponse())
    async with session.post(f"{url}/v1/traces", data=gzip.compress(body),
                            headers={**PB, "Content-Encoding": "gzip"}) as resp:
        assert resp.status == 200
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "01" * 16, "spanId": "02" * 8,
                                                          "name": "json"}]}]}]}
    async with session.post(f"{url}/v1/traces", json=doc, headers=AUTH) as resp:
        assert resp.status == 200 and resp.content_type == "application/json"
        assert json.loads(await resp.read()) == {}
    assert [r.resource_spans[0].scope_spans[0].spans[0].name for r in rec.traces] == ["s0", "s0", "json"]
    # The pipeline gets the protobuf encoding (decompressed) to keep span bytes as received.
    assert rec.raws == [body, body, None]
    async with session.post(f"{url}/v1/logs", json={"resourceLogs": []}, headers=AUTH) as resp:
        assert resp.status == 200
    assert len(rec.logs) == 1


async def test_http_partial_success(http: tuple[str, Recorder, aiohttp.ClientSession]) -> None:
    url, rec, session = http
    rec.rejected = 1
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "01" * 16, "spanId": "02" * 8}, {"traceId": "01" * 16, "spanId": "03" * 8}]}]}]}
    async with session.post(f"{url}/v1/traces", json=doc, headers=AUTH) as resp:
        assert resp.status == 200
        assert json.loads(await resp.read()) == {
            "partialSuccess": {"rejectedSpans": "1", "errorMessage": "bad ids"}}


async def test_http_refusals(http: tuple[str, Recorder, aiohttp.ClientSession]) -> None:
    url, rec, session = http
    body = _request().SerializeToString()
    cases = [
        ({"Content-Type": "application/x-protobuf"}, body, 401),
        ({**AUTH, "Authorization": "Bearer wrong"}, body, 401),
        ({**AUTH, "Content-Type": "text/plain"}, body, 415),
        ({**PB, "Content-Encoding": "br"}, body, 415),
        (PB, b"\xff\xff\xff\xff", 400),
        ({**AUTH, "Content-Type": "application/json"}, b"{not json", 400),
        ({**PB, "Content-Encoding": "gzip"}, b"not gzip at all", 400),
        (PB, b"\0" * (MAX + 1), 413),
        ({**PB, "Content-Encoding": "gzip"}, gzip.compress(b"\0" * (20 * 1024 * 1024)), 413),
    ]
    for headers, data, status in cases:
        async with session.post(f"{url}/v1/traces", data=data, headers=headers) as resp:
            assert resp.status == status, (headers, status)
            if status == 400 and resp.content_type == "application/x-protobuf":
                assert status_pb2.Status.FromString(await resp.read()).code == 3
    rec.refuse = QueueFull("full", retry_after_s=2.0)
    async with session.post(f"{url}/v1/traces", data=body, headers=PB) as resp:
        assert resp.status == 429 and resp.headers["Retry-After"] == "2"
    rec.refuse = None
    async with session.post(f"{url}/v1/traces", data=body, headers=PB) as resp:
        assert resp.status == 200  # still serving after every refusal
    async with session.get(f"{url}/metrics") as resp:
        text = await resp.text()
        assert 'tracescore_requests_refused_total{reason="PayloadTooLarge",transport="http"} 2.0' in text
    for path in ("/healthz", "/readyz"):
        async with session.get(f"{url}{path}") as resp:
            assert resp.status == 200


@pytest.mark.parametrize("path", ["/", "/v1/trace", "/traces"])
async def test_http_a_wrong_path_is_a_404_naming_the_paths_served(
        http: tuple[str, Recorder, aiohttp.ClientSession], path: str) -> None:
    """Issue 19 (7): not aiohttp's bare "404: Not Found". An OTLP request gets a Status in its
    own encoding; the reason phrase (all the OTel Python exporter logs) names the paths too."""
    url, rec, session = http
    async with session.post(f"{url}{path}", data=_request().SerializeToString(), headers=PB) as resp:
        assert resp.status == 404 and resp.content_type == "application/x-protobuf"
        assert "/v1/traces" in (resp.reason or "") and "/v1/logs" in (resp.reason or "")
        status = status_pb2.Status.FromString(await resp.read())
    assert status.code == 5  # NOT_FOUND
    assert status.message.startswith(f"no route at POST {path};")
    assert "POST /v1/traces" in status.message and "POST /v1/logs" in status.message
    async with session.post(f"{url}{path}", json={"resourceSpans": []}, headers=AUTH) as resp:
        assert resp.status == 404 and json.loads(await resp.read())["message"] == status.message
    async with session.get(f"{url}{path}") as resp:  # someone trying the URL with curl
        assert resp.status == 404 and "POST /v1/traces and POST /v1/logs" in (await resp.json())["message"]
    assert rec.traces == []
    async with session.get(f"{url}/metrics") as resp:
        assert 'tracescore_requests_refused_total{reason="UnknownPath",transport="http"} 3.0' in await resp.text()


async def test_http_the_otlp_paths_accept_a_trailing_slash(http: tuple[str, Recorder, aiohttp.ClientSession]) -> None:
    url, rec, session = http
    body = _request().SerializeToString()
    async with session.post(f"{url}/v1/traces/", data=body, headers=PB) as resp:
        assert resp.status == 200
    async with session.post(f"{url}/v1/logs/", json={"resourceLogs": []}, headers=AUTH) as resp:
        assert resp.status == 200
    async with session.post(f"{url}/v1/traces/", data=body, headers={"Content-Type": PB["Content-Type"]}) as resp:
        assert resp.status == 401  # the same route: the same bearer token
    assert len(rec.traces) == 1 and len(rec.logs) == 1


async def test_grpc_receiver() -> None:
    rec = Recorder()
    receiver = GrpcReceiver("127.0.0.1:0", rec, Metrics(), token=TOKEN, max_body_bytes=MAX)
    await receiver.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{receiver.port}") as channel:
            stub = trace_service_pb2_grpc.TraceServiceStub(channel)
            meta = (("authorization", f"Bearer {TOKEN}"),)
            resp = await stub.Export(_request(), metadata=meta, compression=grpc.Compression.Gzip)
            assert resp == trace_service_pb2.ExportTraceServiceResponse()
            rec.rejected = 1
            resp = await stub.Export(_request(2), metadata=meta)
            assert resp.partial_success.rejected_spans == 1
            rec.rejected = 0
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.Export(_request())
            assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.Export(_request(2000), metadata=meta)
            assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            bomb = _request()
            bomb.resource_spans[0].scope_spans[0].spans[0].name = "x" * (8 * 1024 * 1024)
            with pytest.raises(grpc.aio.AioRpcError) as info:  # small on the wire, huge inflated
                await stub.Export(bomb, metadata=meta, compression=grpc.Compression.Gzip)
            assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            raw = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
            with pytest.raises(grpc.aio.AioRpcError) as info:  # not a valid protobuf request
                await raw(b"\x0a\xff\xff", metadata=meta)
            assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
            rec.refuse = QueueFull("full", retry_after_s=1.5)
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.Export(_request(), metadata=meta)
            assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            trailing = dict(info.value.trailing_metadata() or ())
            retry = RetryInfo.FromString(trailing["google.rpc.retryinfo-bin"])
            assert (retry.retry_delay.seconds, retry.retry_delay.nanos) == (1, 500_000_000)
            rec.refuse = None
            logs_stub = logs_service_pb2_grpc.LogsServiceStub(channel)
            await logs_stub.Export(logs_service_pb2.ExportLogsServiceRequest(), metadata=meta)
            assert len(rec.traces) == 2 and len(rec.logs) == 1
            assert [r.resource_spans[0].scope_spans[0].spans[0].name for r in rec.traces] == ["s0", "s0"]
    finally:
        await receiver.shutdown(0.5)


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    import subprocess

    folder = tmp_path_factory.mktemp("tls")
    crt, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(crt)],
        check=True, capture_output=True,
    )
    return str(crt), str(key)


async def test_tls_on_both_listeners(cert: tuple[str, str]) -> None:
    import ssl

    from collector.config import ReceiverConfig

    crt, key = cert
    tls = ReceiverConfig(tls_cert_file=crt, tls_key_file=key).tls()
    assert tls is not None
    rec = Recorder()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(crt, key)
    http = HttpReceiver("127.0.0.1:0", rec, Metrics(), ssl_context=server_ctx)
    grpc_rx = GrpcReceiver("127.0.0.1:0", rec, Metrics(), tls=tls)
    await http.start()
    await grpc_rx.start()
    try:
        client_ctx = ssl.create_default_context(cafile=crt)
        async with aiohttp.ClientSession() as session:
            async with session.post(f"https://127.0.0.1:{http.port}/v1/traces", ssl=client_ctx,
                                    data=_request().SerializeToString(),
                                    headers={"Content-Type": "application/x-protobuf"}) as resp:
                assert resp.status == 200
        creds = grpc.ssl_channel_credentials(root_certificates=tls[0])
        async with grpc.aio.secure_channel(f"127.0.0.1:{grpc_rx.port}", creds) as channel:
            await trace_service_pb2_grpc.TraceServiceStub(channel).Export(_request())
        assert len(rec.traces) == 2
    finally:
        await http.shutdown()
        await grpc_rx.shutdown(0.2)


async def test_grpc_large_request_is_parsed_off_the_loop() -> None:
    rec = Recorder()
    receiver = GrpcReceiver("127.0.0.1:0", rec, Metrics(), max_body_bytes=4 * 1024 * 1024)
    await receiver.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{receiver.port}") as channel:
            request = _request(10_000)  # about 370 KB
            assert request.ByteSize() > 256 * 1024
            await trace_service_pb2_grpc.TraceServiceStub(channel).Export(request)
        assert rec.traces == [request] and rec.raws == [request.SerializeToString()]
    finally:
        await receiver.shutdown(0.2)


@pytest.mark.parametrize("header", ["Bearer tok", "bearer tok", "BEARER tok", "Bearer  tok", " Bearer tok "])
def test_the_bearer_scheme_is_case_insensitive(header: str) -> None:
    from collector.receive.http import check_bearer

    check_bearer(header, "tok")


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer tok2", "Basic tok", "Bearertok", "tok"])
def test_a_wrong_or_missing_bearer_token_is_refused(header: str | None) -> None:
    from collector.common.errors import Unauthenticated
    from collector.receive.http import check_bearer

    with pytest.raises(Unauthenticated):
        check_bearer(header, "tok")
