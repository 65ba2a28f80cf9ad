"""A `tracescore serve` child process for the fault tests: its own config, log, and
optionally a lower open-file limit (``resource.setrlimit`` in ``preexec_fn``)."""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import aiohttp
from daemon_harness import free_port, wait_until
from serve_process import START_S, STOP_S, store_idle

ROOT = Path(__file__).parents[2]
SCORERS = Path(__file__).parent / "scorers_for_tests.py"
PROTOBUF = {"Content-Type": "application/x-protobuf"}


def scoring_config(queue_db: Path, export_endpoint: str, assembly: str = "decision_wait = 0.3\n",
                   export: str = "") -> str:
    """The sections of a daemon on a SQLite queue scoring every run with ``answer_length``."""
    return (f"[assembly]\n{assembly}"
            f'[queue]\nurl = "sqlite:///{queue_db}"\n'
            f'[export]\nendpoint = "{export_endpoint}"\ntimeout_s = 2.0\nmax_backoff_s = 0.5\n{export}'
            f'[[scorers]]\nref = "{SCORERS}:answer_length"\n')


class FaultDaemon:
    """One `tracescore serve` process on free ports, writing ``log``.

    Args:
        tmp: where the config and log go.
        sections: extra TOML text (sections and keys) appended to the receiver's.
        open_files: the process's open-file limit (soft and hard), or None to inherit.
    """

    def __init__(self, tmp: Path, sections: str, open_files: int | None = None) -> None:
        self.http_port, self.grpc_port = free_port(), free_port()
        self.log = tmp / "daemon.log"
        self.config = tmp / "tracescore.toml"
        self.config.write_text(
            f'[receiver]\ngrpc_endpoint = "127.0.0.1:{self.grpc_port}"\n'
            f'http_endpoint = "127.0.0.1:{self.http_port}"\nretry_after_s = 1.0\n' + sections)
        self._open_files = open_files
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}/v1/traces"

    def _limits(self) -> Callable[[], None] | None:
        if self._open_files is None:
            return None
        n = self._open_files
        return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))

    async def start(self) -> FaultDaemon:
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        with self.log.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "collector.cli", "-v", "serve", "--config", str(self.config),
                stdout=log, stderr=log, env=env, cwd=ROOT, preexec_fn=self._limits(),
            )
        await wait_until(self.ready, timeout=START_S, what=f"daemon ready (log: {self.log})")
        return self

    async def readyz(self) -> int:
        self.assert_alive()
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
                async with session.get(f"http://127.0.0.1:{self.http_port}/readyz") as resp:
                    return resp.status
        except (aiohttp.ClientError, TimeoutError):
            return 0

    async def ready(self) -> bool:
        return await self.readyz() == 200

    async def idle(self) -> bool:
        """Whether the daemon's store holds nothing (`serve_process.store_idle`)."""
        self.assert_alive()
        return await store_idle(self.http_port)

    def assert_alive(self) -> None:
        assert self.proc is not None
        if self.proc.returncode is not None:
            raise AssertionError(f"daemon exited {self.proc.returncode}: {self.log.read_text()[-3000:]}")

    async def metrics(self) -> str:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{self.http_port}/metrics") as resp:
                return await resp.text()

    async def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(sig)
            try:
                await asyncio.wait_for(self.proc.wait(), STOP_S)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
