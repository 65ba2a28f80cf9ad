"""`ServeProcess`: a real ``tracescore serve`` child process, and the CLI run as a command."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
from daemon_harness import CaptureBackend, free_port, wait_until

START_S = 120.0
"""How long a started daemon has to answer /readyz: Python's start-up and the imports (litellm's,
for a judge scorer) take a few seconds, more than 60 on a machine loaded ten times over (seen
in a soak with other suites running); a failure detector, not a claim about speed."""
STOP_S = 60.0
"""How long a signalled daemon has to exit (it drains first)."""
PROBE = aiohttp.ClientTimeout(total=5)
"""One /readyz probe: a listener that accepts and never answers must not stall the start-up wait."""


async def cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
              timeout: float = 60.0) -> tuple[int, str, str]:  # noqa: ASYNC109
    """Run ``tracescore ARGS`` as a command; its exit code, stdout and stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "collector.cli", *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})},
        cwd=cwd)
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return int(proc.returncode or 0), out.decode(), err.decode()


async def store_idle(http_port: int) -> bool:
    """Whether the store of the daemon on ``http_port`` holds nothing (``/status``, counted when
    asked): no trace waiting for its decision, no job queued or running, no score or request
    waiting to leave. Every run received is then scored and exported, or never will be: the
    positive event after which a check that something did *not* happen (a second score) holds."""
    async with aiohttp.ClientSession(timeout=PROBE) as session:
        async with session.get(f"http://127.0.0.1:{http_port}/status") as resp:
            (own, *_) = (await resp.json())["replicas"]
    queue = own["queue"]
    return not any(queue[k] for k in ("traces", "queued", "in_flight", "outbox", "forward_requests"))


class ServeProcess:
    """A `tracescore serve` child process (``-v`` by default, logging to ``log``)."""

    def __init__(self, config: Path, log: Path, http_port: int, *, flags: tuple[str, ...] = ("-v",),
                 env: dict[str, str] | None = None) -> None:
        self.config, self.log, self.http_port, self.flags = config, log, http_port, flags
        self.env = env or {}
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **self.env}
        with self.log.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "collector.cli", "serve", "--config", str(self.config), *self.flags,
                stdout=log, stderr=log, env=env, cwd=self.config.parent,
            )
        await wait_until(self.ready, timeout=START_S, what=f"daemon ready (log: {self.log})")

    async def ready(self) -> bool:
        assert self.proc is not None
        if self.proc.returncode is not None:
            raise AssertionError(f"daemon exited: {self.log.read_text()[-3000:]}")
        try:
            async with aiohttp.ClientSession(timeout=PROBE) as session:
                async with session.get(f"http://127.0.0.1:{self.http_port}/readyz") as resp:
                    return resp.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    async def metrics(self) -> str:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{self.http_port}/metrics") as resp:
                return await resp.text()

    async def idle(self) -> bool:
        """Whether the store holds nothing (see `store_idle`)."""
        return await store_idle(self.http_port)

    async def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_S) -> int:  # noqa: ASYNC109
        assert self.proc is not None
        self.proc.send_signal(sig)
        code = await asyncio.wait_for(self.proc.wait(), timeout)
        self.proc = None
        return code

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        self.proc = None


@contextlib.asynccontextmanager
async def sqlite_daemon(tmp_path: Path, scorer_ref: str, *, decision_wait: float,
                        assembly: str = "") -> AsyncIterator[tuple[CaptureBackend, ServeProcess]]:
    """A capturing OTLP backend, running, and a `ServeProcess` (not started) on a SQLite queue in
    ``tmp_path`` exporting to it: OTLP/gRPC and HTTP on free ports, one scorer; ``assembly``:
    more ``[assembly]`` lines. The daemon is killed and the backend stopped on leaving."""
    backend = await CaptureBackend().start()
    http_port, grpc_port = free_port(), free_port()
    config = tmp_path / "tracescore.toml"
    config.write_text(
        f'[receiver]\ngrpc_endpoint = "127.0.0.1:{grpc_port}"\nhttp_endpoint = "127.0.0.1:{http_port}"\n'
        f'[assembly]\ndecision_wait = {decision_wait}\n{assembly}'
        f'[queue]\nurl = "sqlite:///{tmp_path / "queue.db"}"\n'
        f'[export]\nendpoint = "{backend.endpoint}"\ntimeout_s = 2.0\nmax_backoff_s = 0.5\n'
        f'[[scorers]]\nref = "{scorer_ref}"\n'
    )
    daemon = ServeProcess(config, tmp_path / "daemon.log", http_port)
    try:
        yield backend, daemon
    finally:
        await daemon.kill()
        await backend.stop()
