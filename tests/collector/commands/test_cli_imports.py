"""Each command imports only what it uses: `--version`, `--help`, `check` of a config without
scorers, `dead-letters list` on an empty SQLite queue and `status --once` start without the
scorers, the adapters, the demo, LiteLLM, gRPC, and redis-py or aiohttp where they do not
talk to Redis or over HTTP (issue: a CLI that answers at once).

Deterministic, not timed: each command runs as ``python -m collector.cli ...`` would (through
`runpy`) in a fresh process of this tree, which writes its ``sys.modules`` when it exits.
(``-X importtime`` would not do: it does not log a module loaded by `importlib.import_module`,
which is how the CLI loads a command's implementation.)
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from ports import hold_port  # tests/support
from repo_paths import REPO

from collector.store.sqlite.schema import SCHEMA

RUNNER = """
import atexit, os, runpy, sys
atexit.register(lambda: open(os.environ["TRACESCORE_MODULES_OUT"], "w").write("\\n".join(sorted(sys.modules))))
runpy.run_module("collector.cli", run_name="__main__", alter_sys=True)
"""
"""``python -m collector.cli`` that also writes, at exit, the name of every module it imported."""

NEVER = ("litellm", "adapters", "scorers", "collector.commands.demo", "collector.service", "grpc")
"""What none of the light commands may import."""


def imported(*argv: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``tracescore ARGV`` in a fresh process on this tree; its result and every module it imported."""
    out = cwd / "modules.txt"
    env = {**os.environ, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "TRACESCORE_MODULES_OUT": str(out)}
    done = subprocess.run([sys.executable, "-c", RUNNER, *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    modules = set(out.read_text().split())
    assert "collector.commands.table" in modules, done.stderr[-2000:]
    return done, modules


def found(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """The modules of ``modules`` that are one of ``names`` or inside one of them."""
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["dead-letters", "--help"], ["score", "--help"]])
def test_version_and_help_import_no_command(argv: list[str], tmp_path: Path) -> None:
    done, modules = imported(*argv, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    heavy = ("pydantic", "rich", "aiohttp", "redis", "prometheus_client", "pythonjsonlogger", "collector.config",
             "collector.commands.check", "collector.commands.score", "collector.commands.scoring",
             "collector.commands.inspect")
    assert found(modules, NEVER + heavy) == []


def test_check_without_scorers_imports_the_config_only(tmp_path: Path) -> None:
    config = tmp_path / "tracescore.toml"
    config.write_text(f'[queue]\nurl = "sqlite:///{tmp_path / "queue.db"}"\n'
                      '[export]\nendpoint = "http://127.0.0.1:14317"\n')
    done, modules = imported("check", str(config), cwd=tmp_path)
    assert done.returncode == 0 and "warning: no scorer configured" in done.stdout, done.stderr[-2000:]
    assert "collector.config" in modules
    assert found(modules, NEVER + ("aiohttp", "redis", "rich", "collector.work.worker", "collector.store")) == []


def test_check_with_scorers_imports_them(tmp_path: Path) -> None:
    config = tmp_path / "tracescore.toml"
    config.write_text('[[scorers]]\nref = "scorers.builtin:completeness"\n')
    done, modules = imported("check", str(config), cwd=tmp_path)
    assert done.returncode == 0 and "scorer completeness" in done.stdout, done.stderr[-2000:]
    assert "scorers.builtin" in modules  # the same log does show what a command imports


def test_dead_letters_list_on_sqlite_imports_no_redis(tmp_path: Path) -> None:
    queue = tmp_path / "queue.db"
    with sqlite3.connect(queue) as db:
        db.executescript(SCHEMA)
    config = tmp_path / "tracescore.toml"
    config.write_text(f'[queue]\nurl = "sqlite:///{queue}"\n')
    done, modules = imported("dead-letters", "list", "--config", str(config), cwd=tmp_path)
    assert done.returncode == 0 and "0 dead letter(s)" in done.stdout, done.stderr[-2000:]
    assert "collector.store.sqlite.dead_letters" in modules
    assert found(modules, NEVER + ("aiohttp", "redis", "collector.store.sqlite.store", "collector.store.redis")) == []


def test_status_once_imports_no_store_and_no_config(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nothing listens on: the command reports it and exits 1
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done, modules = imported("status", f"127.0.0.1:{port}", "--once", cwd=tmp_path)
    assert done.returncode == 1 and f"127.0.0.1:{port}" in done.stderr, done.stderr[-2000:]
    assert "urllib.request" in modules  # the standard library's client: no async HTTP stack to import
    assert found(modules, NEVER + ("aiohttp", "asyncio", "redis", "pydantic", "collector.config",
                                   "collector.store")) == []


STATUS_NEVER = NEVER + ("aiohttp", "asyncio", "redis", "collector.store", "collector.export", "collector.receive")
"""What ``tracescore status`` never imports: an async stack, a store, the daemon's stages."""


def test_status_without_a_url_reads_no_config(tmp_path: Path) -> None:
    """No URL and no ``--config``: the default listener, and no configuration read (whether a
    daemon answers on 127.0.0.1:4318 of this machine is not this test's business)."""
    done, modules = imported("status", "--once", "--interval", "0.5", cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    assert found(modules, STATUS_NEVER + ("pydantic", "collector.config")) == []


def test_status_with_a_config_reads_it_and_imports_no_async_stack(tmp_path: Path) -> None:
    """``--config`` names the listener (0.0.0.0 reached on 127.0.0.1): reading it imports
    pydantic and the configuration, and still no asyncio, aiohttp, redis-py or daemon code."""
    holder = hold_port()  # nothing listens on it, and nobody else takes it meanwhile
    try:
        port = holder.getsockname()[1]
        config = tmp_path / "tracescore.toml"
        config.write_text(f'[receiver]\nhttp_endpoint = "0.0.0.0:{port}"\n[queue]\nurl = "redis://127.0.0.1:1/0"\n')
        done, modules = imported("status", "--config", str(config), "--once", cwd=tmp_path)
    finally:
        holder.close()
    assert done.returncode == 1 and f"http://127.0.0.1:{port}: URLError" in done.stderr, done.stderr[-2000:]
    assert {"pydantic", "collector.config"} <= modules
    assert found(modules, STATUS_NEVER) == []
