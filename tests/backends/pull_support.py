"""``tracescore score --from`` as a user runs it, and what the backend tests compare of its rows."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from backends_support import SCORERS

SCORED = ("relevance", "brevity", "turns")
"""The backend scorers a backfill runs: two run scorers and a conversation scorer."""


def score(*args: str, cwd: Path, scorers: tuple[str, ...] = SCORED,
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``tracescore score ARGS --scorer ... --format jsonl`` (FILEs or ``--from URL`` in ARGS)."""
    refs = [arg for name in scorers for arg in ("--scorer", f"{SCORERS}:{name}")]
    return subprocess.run([sys.executable, "-m", "collector.cli", "score", *args, *refs, "--format", "jsonl"],
                          capture_output=True, text=True, timeout=240, cwd=cwd,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})})


def rows(done: subprocess.CompletedProcess[str], drop: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The JSONL rows of a ``score`` run (it must have succeeded), sorted, without the ``drop`` keys."""
    assert done.returncode == 0, done.stderr
    out = [{k: v for k, v in json.loads(line).items() if k not in drop} for line in done.stdout.splitlines()]
    return sorted(out, key=lambda r: (r["trace_id"], r["span_id"], r["scorer"]))


async def score_async(*args: str, cwd: Path, scorers: tuple[str, ...] = SCORED,
                      env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`score`, awaited (the event loop stays free: a judge server of the test runs on it)."""
    refs = [arg for name in scorers for arg in ("--scorer", f"{SCORERS}:{name}")]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "collector.cli", "score", *args, *refs, "--format", "jsonl", cwd=cwd,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})})
    out, err = await asyncio.wait_for(proc.communicate(), 240)
    return subprocess.CompletedProcess(list(args), int(proc.returncode or 0), out.decode(), err.decode())
