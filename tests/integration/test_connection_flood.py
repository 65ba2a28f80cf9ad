"""A connection flood against a daemon with 1,024 open files (issue 13): ``ulimit -n 1024``
(set with ``resource.setrlimit`` in the child), 1,500 slow connections that never finish
a request held open, and meanwhile a normal client is served within its timeout, its runs
are scored, and accept errors do not flood the log."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
import grpc
from daemon_harness import CaptureBackend, agent_trace_body, wait_until
from fault_daemon import PROTOBUF, FaultDaemon, scoring_config
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

SLOW = 1500  # the issue saw the service go down at about 1,100; here the old daemon fell at 1,500


async def _slow_connection(port: int, grpc_port: int, i: int) -> asyncio.StreamWriter | None:
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", grpc_port if i % 10 == 0 else port), 5)
        writer.write(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n")  # never finished
        await writer.drain()
        return writer
    except (OSError, TimeoutError):
        return None  # refused, or left in a full backlog


async def test_1500_slow_connections_under_1024_files_do_not_stop_a_normal_client(tmp_path: Path) -> None:
    backend = await CaptureBackend().start()
    daemon = FaultDaemon(tmp_path, scoring_config(tmp_path / "queue.db", backend.endpoint), open_files=1024)
    writers: list[asyncio.StreamWriter] = []
    try:
        await daemon.start()
        for start in range(0, SLOW, 100):
            batch = await asyncio.gather(*(_slow_connection(daemon.http_port, daemon.grpc_port, i)
                                           for i in range(start, start + 100)))
            daemon.assert_alive()
            writers += [w for w in batch if w is not None]
        assert len(writers) >= 1100  # opened (the daemon closes the excess it cannot keep)

        expected = set()
        timings = []
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            for _ in range(5):
                body, trace_id, _ = agent_trace_body()
                started = time.monotonic()
                async with session.post(daemon.url, data=body, headers=PROTOBUF) as resp:
                    assert resp.status == 200
                timings.append(time.monotonic() - started)
                expected.add(trace_id)
        body, trace_id, _ = agent_trace_body()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{daemon.grpc_port}") as channel:
            stub = trace_service_pb2_grpc.TraceServiceStub(channel)
            await stub.Export(trace_service_pb2.ExportTraceServiceRequest.FromString(body), timeout=10)
        expected.add(trace_id)
        await wait_until(lambda: {s.span.trace_id.hex() for s in backend.scores()} == expected,
                         timeout=30, what="the normal client's runs scored")
        assert max(timings) < 10
        print(f"normal client served in {max(timings) * 1000:.0f} ms at most while {len(writers)} "
              f"slow connections were held")  # the figure
        daemon.assert_alive()
        assert daemon.log.stat().st_size < 200_000, "the log grew with accept errors"
        assert "Too many open files" not in daemon.log.read_text()
    finally:
        for writer in writers:
            writer.close()
        await daemon.stop()
        await backend.stop()
