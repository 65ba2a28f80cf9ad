"""SPEC §5, no loops and no shared ports, with real ``tracescore serve`` processes: a second
daemon on a port another process listens on (our daemon, or a plain gRPC server that sets
SO_REUSEPORT) exits non-zero naming the port while the first one keeps receiving; a daemon
whose export endpoint is its own listener, however the host is written, exits naming
``export.endpoint``."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from daemon_harness import emit_agent_trace, free_port
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from serve_process import ServeProcess

EXIT_TIMEOUT_S = 60.0  # a daemon that must not start has this long to exit (start-up on a busy machine)


def write_config(path: Path, grpc_port: int, http_port: int, export: str = "") -> Path:
    """A daemon's configuration: its listeners on 127.0.0.1, its own SQLite queue."""
    path.mkdir(parents=True, exist_ok=True)
    config = path / "tracescore.toml"
    config.write_text(
        f'[receiver]\ngrpc_endpoint = "127.0.0.1:{grpc_port}"\nhttp_endpoint = "127.0.0.1:{http_port}"\n'
        f'[queue]\nurl = "sqlite:///{path / "queue.db"}"\n'
        f'[export]\nendpoint = "{export}"\n')
    return config


async def serve_until_exit(config: Path) -> tuple[int, str]:
    """Run ``tracescore serve`` that must refuse to start: its exit code and stderr, within
    `EXIT_TIMEOUT_S` (a daemon still running then is killed and the test fails)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "collector.cli", "serve", "--config", str(config),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=config.parent,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    try:
        _, err = await asyncio.wait_for(proc.communicate(), EXIT_TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await asyncio.wait_for(proc.wait(), 10)
        raise AssertionError(f"the daemon did not exit within {EXIT_TIMEOUT_S}s: it started") from None
    assert proc.returncode is not None
    return proc.returncode, err.decode()


@pytest.fixture
async def first(tmp_path: Path) -> AsyncIterator[tuple[ServeProcess, int]]:
    """A running daemon on two fixed loopback ports, and its gRPC port."""
    grpc_port, http_port = free_port(), free_port()
    daemon = ServeProcess(write_config(tmp_path / "first", grpc_port, http_port), tmp_path / "first.log", http_port)
    try:
        await daemon.start()
        yield daemon, grpc_port
        assert await daemon.stop() == 0
    finally:
        await daemon.kill()


async def received_over_grpc(daemon: ServeProcess) -> float:
    """The spans the daemon counted on its gRPC listener."""
    found = re.search(r'^tracescore_spans_received_total\{transport="grpc"\} (\S+)$', await daemon.metrics(), re.M)
    return float(found.group(1)) if found else 0.0


async def still_receives(daemon: ServeProcess, grpc_port: int) -> None:
    """The daemon answers /readyz and takes an agent trace from the SDK's OTLP gRPC exporter."""
    assert await daemon.ready()
    before = await received_over_grpc(daemon)
    exporter = GrpcExporter(endpoint=f"127.0.0.1:{grpc_port}", insecure=True, timeout=30)
    await asyncio.wait_for(asyncio.to_thread(emit_agent_trace, exporter), 60)
    assert await received_over_grpc(daemon) == before + 2  # the agent span and its chat span


async def test_a_second_daemon_on_a_taken_grpc_port_exits_and_the_first_keeps_receiving(
        tmp_path: Path, first: tuple[ServeProcess, int]) -> None:
    daemon, grpc_port = first
    code, err = await serve_until_exit(write_config(tmp_path / "second", grpc_port, free_port()))
    assert code == 1, err
    assert f"cannot start: cannot listen on 127.0.0.1:{grpc_port} (gRPC): the port is in use" in err
    await still_receives(daemon, grpc_port)


async def test_a_second_daemon_on_a_taken_http_port_exits_and_the_first_keeps_receiving(
        tmp_path: Path, first: tuple[ServeProcess, int]) -> None:
    daemon, grpc_port = first
    code, err = await serve_until_exit(write_config(tmp_path / "second", free_port(), daemon.http_port))
    assert code == 1, err
    assert f"cannot start: cannot listen on 127.0.0.1:{daemon.http_port} (HTTP): address already in use" in err
    await still_receives(daemon, grpc_port)


async def test_a_port_held_by_a_grpc_server_with_so_reuseport_is_not_shared(tmp_path: Path) -> None:
    """A gRPC server with default options binds with SO_REUSEPORT: ours does not, so it fails."""
    other = grpc.aio.server()
    port = other.add_insecure_port("127.0.0.1:0")
    await other.start()
    try:
        code, err = await serve_until_exit(write_config(tmp_path, port, free_port()))
    finally:
        await other.stop(None)
    assert code == 1, err
    assert f"cannot listen on 127.0.0.1:{port} (gRPC)" in err


@pytest.mark.parametrize("host", ["localhost", "[::1]", "0.0.0.0"])
async def test_a_daemon_exporting_to_its_own_listener_exits_naming_the_key(tmp_path: Path, host: str) -> None:
    http_port = free_port()
    endpoint = f"http://{host}:{http_port}"
    code, err = await serve_until_exit(write_config(tmp_path, free_port(), http_port, export=endpoint))
    assert code == 2, err
    assert (f"export.endpoint: {endpoint} is this daemon's own listener 127.0.0.1:{http_port}: "
            "it would receive its own output for ever") in err
