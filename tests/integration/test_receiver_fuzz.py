"""Fuzzing both receivers of a real daemon with malformed bodies (issue 13).

Hypothesis (seeded, derandomized, no example database) generates a few thousand bodies:
byte-level mutations and truncations of a valid OTLP request, random bytes, random JSON
documents (deep, odd numbers, odd strings), each sent as protobuf or JSON, plain, gzip or
deflate (with extra members or trailing bytes); and raw gRPC messages. The daemon never
crashes, never answers 5xx (nor gRPC INTERNAL/UNKNOWN) to them, and the valid runs sent
before and after are each scored exactly once.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from pathlib import Path

import aiohttp
import grpc
from daemon_harness import CaptureBackend, agent_trace_body, wait_until
from fault_daemon import FaultDaemon, scoring_config
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

HTTP_BODIES = 2500
GRPC_BODIES = 500
BASE, _, _ = agent_trace_body()  # mutated below; not one of the runs checked

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20) | st.sampled_from(["5b8efff798038103d269b633813fc60c", "zz", "\ud800"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["resourceSpans", "scopeSpans", "spans", "traceId", "spanId", "name", "attributes",
                         "key", "value", "intValue", "startTimeUnixNano", "kind", "\udc00"]) | st.text(max_size=5),
        inner, max_size=4),
    max_leaves=30,
)


def _mutate(data: tuple[int, bytes, int]) -> bytes:
    at, patch, cut = data
    at %= len(BASE)
    return (BASE[:at] + patch + BASE[at + len(patch):])[: max(1, len(BASE) - cut)]


BODIES = st.one_of(
    st.tuples(st.integers(0, 10**6), st.binary(min_size=1, max_size=8), st.integers(0, 64)).map(_mutate),
    st.binary(max_size=512),
    JSON_VALUES.map(lambda v: json.dumps(v).encode("utf-8", "surrogatepass")),
    st.integers(1, 900).map(lambda depth: b'{"resourceSpans":' + b"[" * depth + b"]" * depth + b"}"),
)
ENCODINGS = st.sampled_from(["", "gzip", "deflate", "gzip+member", "gzip+garbage"])


def _encode(body: bytes, encoding: str) -> tuple[bytes, str]:
    if encoding == "deflate":
        return zlib.compress(body), "deflate"
    if encoding == "gzip+member":
        return gzip.compress(body) + gzip.compress(body[:10]), "gzip"
    if encoding == "gzip+garbage":
        return gzip.compress(body) + b"\x00garbage", "gzip"
    return (gzip.compress(body), "gzip") if encoding == "gzip" else (body, "")


def _cases() -> list[tuple[bytes, str, str]]:
    cases: list[tuple[bytes, str, str]] = []

    @seed(13)
    @settings(max_examples=HTTP_BODIES, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(body=BODIES, ctype=st.sampled_from(["application/x-protobuf", "application/json"]),
           encoding=ENCODINGS)
    def collect(body: bytes, ctype: str, encoding: str) -> None:
        data, header = _encode(body, encoding)
        cases.append((data, ctype, header))

    collect()
    return cases


async def _send(session: aiohttp.ClientSession, url: str, case: tuple[bytes, str, str]) -> int:
    data, ctype, encoding = case
    headers = {"Content-Type": ctype, **({"Content-Encoding": encoding} if encoding else {})}
    async with session.post(url, data=data, headers=headers) as resp:
        await resp.read()
        return resp.status


async def test_fuzzed_bodies_never_crash_nor_5xx_and_valid_runs_are_scored_once(tmp_path: Path) -> None:
    cases = await asyncio.to_thread(_cases)
    assert len(cases) >= HTTP_BODIES * 0.9
    backend = await CaptureBackend().start()
    daemon = FaultDaemon(tmp_path, scoring_config(tmp_path / "queue.db", backend.endpoint,
                                                   export="forward_spans = false\n"))
    try:
        await daemon.start()
        checked = []
        async with aiohttp.ClientSession(auto_decompress=False) as session:
            before, trace_before, _ = agent_trace_body()
            assert await _send(session, daemon.url, (before, "application/x-protobuf", "")) == 200
            checked.append(trace_before)
            limit = asyncio.Semaphore(8)

            async def one(case: tuple[bytes, str, str]) -> int:
                async with limit:
                    return await _send(session, daemon.url, case)

            async with asyncio.timeout(180):
                statuses = await asyncio.gather(*(one(c) for c in cases))
            assert not [s for s in statuses if s >= 500], sorted(set(statuses))
            assert set(statuses) <= {200, 400, 413, 415}, sorted(set(statuses))

            async with grpc.aio.insecure_channel(f"127.0.0.1:{daemon.grpc_port}") as channel:
                export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
                codes = set()
                for data, _, _ in cases[:GRPC_BODIES]:
                    try:
                        await export(data, timeout=10)
                        codes.add(grpc.StatusCode.OK)
                    except grpc.aio.AioRpcError as err:
                        codes.add(err.code())
            assert codes <= {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT}, codes

            after, trace_after, _ = agent_trace_body()
            assert await _send(session, daemon.url, (after, "application/x-protobuf", "")) == 200
            checked.append(trace_after)
        daemon.assert_alive()

        def scores_of(trace_id: str) -> int:
            return sum(s.span.trace_id.hex() == trace_id for s in backend.scores())

        await wait_until(lambda: all(scores_of(t) for t in checked), timeout=60, what="the valid runs scored")
        # A second score would be in the store (a job, a score to export) until exported: once
        # the store holds nothing, it would be in the backend. The short sleep only adds margin.
        await wait_until(daemon.idle, timeout=30, what="nothing left in the store")
        await asyncio.sleep(0.5)
        assert [scores_of(t) for t in checked] == [1, 1]
        assert "Traceback" not in daemon.log.read_text()
    finally:
        await daemon.stop()
        await backend.stop()
