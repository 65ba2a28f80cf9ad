"""Ingest throughput of a real `tracescore serve` process on the embedded SQLite queue.

The daemon runs in a subprocess (its CPU is not the client's). The client posts N OTLP/HTTP
protobuf requests, each holding T agent traces (an ``invoke_agent`` root span and a
``chat`` child with GenAI messages), with C requests in flight, and reports request
latency, accepted spans per second, and the time until every run was scored (a function
scorer; no export endpoint, so nothing leaves the machine).

    .venv/bin/python bench/ingest.py --requests 500 --traces-per-request 10 --concurrency 16
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

ROOT = Path(__file__).resolve().parents[1]
SCORER = '''
from scorers import create_scorer
length = create_scorer(id="length", description="answer length", type="agent").generate_score(
    lambda run: min(1.0, len(run.output[-1].content) / 100) if len(run.output) else 0.0)
'''
MESSAGES_IN = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "What is the capital of France?"}]}])
MESSAGES_OUT = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Paris."}]}])


def _kv(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def make_request(traces: int) -> bytes:
    """One request with ``traces`` fresh agent traces."""
    spans = []
    now = time.time_ns()
    for _ in range(traces):
        trace_id, root_id, chat_id = secrets.token_bytes(16), secrets.token_bytes(8), secrets.token_bytes(8)
        messages = [_kv("gen_ai.input.messages", MESSAGES_IN), _kv("gen_ai.output.messages", MESSAGES_OUT)]
        spans.append(Span(trace_id=trace_id, span_id=chat_id, parent_span_id=root_id, name="chat gpt-4o-mini",
                          start_time_unix_nano=now, end_time_unix_nano=now + 1000,
                          attributes=[_kv("gen_ai.operation.name", "chat"), *messages]))
        spans.append(Span(trace_id=trace_id, span_id=root_id, name="invoke_agent bench",
                          start_time_unix_nano=now, end_time_unix_nano=now + 2000,
                          attributes=[_kv("gen_ai.operation.name", "invoke_agent"),
                                      _kv("gen_ai.agent.name", "bench"), *messages]))
    resource = ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])
    resource.resource.attributes.append(_kv("service.name", "bench"))
    return ExportTraceServiceRequest(resource_spans=[resource]).SerializeToString()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_ready(session: aiohttp.ClientSession, base: str, proc: asyncio.subprocess.Process) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.returncode is not None:
            raise SystemExit("daemon exited during start")
        try:
            async with session.get(f"{base}/readyz") as resp:
                if resp.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.05)
    raise SystemExit("daemon not ready after 30 s")


async def scored(session: aiohttp.ClientSession, base: str) -> float:
    async with session.get(f"{base}/metrics") as resp:
        for line in (await resp.text()).splitlines():
            if line.startswith('tracescore_decisions_total{reason="scored"'):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--traces-per-request", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--decision-wait", type=float, default=0.5)
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="tracescore-bench-"))
    (folder / "bench_scorers.py").write_text(SCORER)
    port = free_port()
    (folder / "ts.toml").write_text(
        f'[receiver]\ngrpc_endpoint = ""\nhttp_endpoint = "127.0.0.1:{port}"\n'
        f'[assembly]\ndecision_wait = {args.decision_wait}\n'
        f'[queue]\nurl = "sqlite:///{folder / "queue.db"}"\nmax_pending_jobs = 10000000\n'
        f'[[scorers]]\nref = "{folder / "bench_scorers.py"}:length"\n'
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "collector.cli", "serve", "--config", str(folder / "ts.toml"), cwd=ROOT, env=env)
    bodies = [make_request(args.traces_per_request) for _ in range(args.requests)]
    base = f"http://127.0.0.1:{port}"
    latencies: list[float] = []
    refused = 0
    try:
        async with aiohttp.ClientSession() as session:
            await wait_ready(session, base, proc)
            queue: asyncio.Queue[bytes] = asyncio.Queue()
            for body in bodies:
                queue.put_nowait(body)

            async def client() -> None:
                nonlocal refused
                while not queue.empty():
                    body = queue.get_nowait()
                    started = time.perf_counter()
                    async with session.post(f"{base}/v1/traces", data=body,
                                            headers={"Content-Type": "application/x-protobuf"}) as resp:
                        await resp.read()
                        if resp.status != 200:
                            refused += 1
                    latencies.append(time.perf_counter() - started)

            started = time.perf_counter()
            await asyncio.gather(*(client() for _ in range(args.concurrency)))
            ingest_s = time.perf_counter() - started
            runs = args.requests * args.traces_per_request
            deadline = time.monotonic() + 600
            while await scored(session, base) < runs - refused * args.traces_per_request:
                if time.monotonic() > deadline:
                    raise SystemExit("not every run was scored within 600 s")
                await asyncio.sleep(0.1)
            total_s = time.perf_counter() - started
    finally:
        proc.send_signal(signal.SIGTERM)
        await proc.wait()
    spans = args.requests * args.traces_per_request * 2
    latencies.sort()
    print(f"requests {args.requests} x {args.traces_per_request} traces, concurrency {args.concurrency}, "
          f"refused {refused}")
    print(f"ingest  {ingest_s:.2f} s  {args.requests / ingest_s:.0f} req/s  {spans / ingest_s:.0f} spans/s  "
          f"latency p50 {statistics.median(latencies) * 1e3:.1f} ms  "
          f"p99 {latencies[int(len(latencies) * 0.99) - 1] * 1e3:.1f} ms")
    print(f"scored  every run {total_s:.2f} s after the first request "
          f"(decision_wait {args.decision_wait} s): {runs / total_s:.0f} runs/s")


if __name__ == "__main__":
    asyncio.run(main())
