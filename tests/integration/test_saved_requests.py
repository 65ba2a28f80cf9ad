"""Saved OTLP files, from the daemon (issue 42 point 10): with ``[receiver] save_dir`` a real
``tracescore serve`` writes each request it accepted (gRPC and HTTP, protobuf and JSON, traces
and logs) as a file, and ``tracescore inspect DIR`` and ``score DIR`` read that directory: the
same runs as the requests themselves, the number of files read in the summary."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
from daemon_harness import emit_agent_trace, free_port, wait_until
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from repo_paths import FIXTURES
from serve_process import ServeProcess, cli

JSON_TRACE = FIXTURES / "traceloop" / "S1.json"
EVENTS = FIXTURES / "openai-v2-events" / "S1"  # a trace whose messages are in its logs


def rows(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def saved(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if not p.name.startswith("."))


async def test_the_daemon_saves_what_it_accepts_as_files_inspect_and_score_read(tmp_path: Path) -> None:
    http_port, grpc_port = free_port(), free_port()
    folder = tmp_path / "otlp"
    config = tmp_path / "tracescore.toml"
    config.write_text(f'[receiver]\ngrpc_endpoint = "127.0.0.1:{grpc_port}"\nhttp_endpoint = "127.0.0.1:{http_port}"\n'
                      f'save_dir = "{folder}"\n[queue]\nurl = "sqlite:///{tmp_path / "queue.db"}"\n')
    daemon = ServeProcess(config, tmp_path / "daemon.log", http_port)
    await daemon.start()
    try:
        grpc_trace = await asyncio.to_thread(emit_agent_trace, GrpcExporter(
            endpoint=f"127.0.0.1:{grpc_port}", insecure=True, timeout=10), answer="Over gRPC.")
        http_trace = await asyncio.to_thread(emit_agent_trace, HttpExporter(
            endpoint=f"http://127.0.0.1:{http_port}/v1/traces", timeout=10), answer="Over HTTP.")
        async with aiohttp.ClientSession() as session:  # OTLP/JSON bodies, as an agent may post them
            for path, route in ((JSON_TRACE, "traces"), (Path(f"{EVENTS}.json"), "traces"),
                                (Path(f"{EVENTS}.logs.json"), "logs")):
                async with session.post(f"http://127.0.0.1:{http_port}/v1/{route}", data=path.read_bytes(),
                                        headers={"Content-Type": "application/json"}) as resp:
                    assert resp.status == 200, await resp.text()
        # The SDK sends each span on its own (SimpleSpanProcessor): two requests per agent trace.
        await wait_until(lambda: len(saved(folder)) == 7, timeout=30, what="seven saved requests")
    finally:
        assert await daemon.stop() == 0
    names = [p.name for p in saved(folder)]
    assert sum(n.endswith(".logs.pb") for n in names) == 1 and all(n.endswith(".pb") for n in names)

    code, out, err = await cli("inspect", str(folder), "--format", "jsonl")
    assert code == 0, err
    found = {row["trace_id"]: row for row in rows(out)}
    assert set(found) >= {grpc_trace[0], http_trace[0]}
    assert found[grpc_trace[0]]["output"][0]["content"] == "Over gRPC."
    code, direct, _ = await cli("inspect", str(JSON_TRACE), f"{EVENTS}.json", f"{EVENTS}.logs.json", "--format", "jsonl")
    for row in rows(direct):  # a JSON body saved as protobuf reads the same; its logs still join their trace
        assert found[row["trace_id"]] == row
    assert len(found) == 4

    code, _, err = await cli("inspect", str(folder), "--format", "table", env={"COLUMNS": "200"})
    assert code == 0 and "4 run(s) in 4 trace(s) from 7 file(s)" in err  # the files read, not the one argument
    code, out, err = await cli("score", str(folder), "--scorer", "scorers.builtin:completeness", "--format", "jsonl")
    assert code == 0, err
    assert {row["trace_id"] for row in rows(out)} == set(found)


async def test_saving_stops_at_save_max_bytes_and_the_requests_are_still_accepted(tmp_path: Path) -> None:
    http_port = free_port()
    folder = tmp_path / "otlp"
    config = tmp_path / "tracescore.toml"
    config.write_text(f'[receiver]\ngrpc_endpoint = ""\nhttp_endpoint = "127.0.0.1:{http_port}"\n'
                      f'save_dir = "{folder}"\nsave_max_bytes = 1\n[queue]\nurl = "sqlite:///{tmp_path / "q.db"}"\n')
    daemon = ServeProcess(config, tmp_path / "daemon.log", http_port)
    await daemon.start()
    try:
        async with aiohttp.ClientSession() as session:
            for _ in range(3):
                async with session.post(f"http://127.0.0.1:{http_port}/v1/traces", data=JSON_TRACE.read_bytes(),
                                        headers={"Content-Type": "application/json"}) as resp:
                    assert resp.status == 200
        await wait_until(lambda: "no more are saved until a restart" in daemon.log.read_text(), timeout=30,
                         what="the warning that saving stopped")
    finally:
        assert await daemon.stop() == 0
    assert len(saved(folder)) == 1
    assert daemon.log.read_text().count("save_max_bytes") == 1  # said once


async def test_a_save_dir_that_cannot_be_written_stops_the_start_naming_the_key(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    config = tmp_path / "tracescore.toml"
    config.write_text(f'[receiver]\ngrpc_endpoint = ""\nhttp_endpoint = "127.0.0.1:0"\nsave_dir = "{blocker / "otlp"}"\n'
                      f'[queue]\nurl = "sqlite:///{tmp_path / "q.db"}"\n')
    code, _, err = await cli("serve", "--config", str(config))
    assert code == 2 and "receiver.save_dir: cannot write requests there" in err
