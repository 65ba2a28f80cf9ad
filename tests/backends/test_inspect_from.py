"""``tracescore inspect --from phoenix+URL/PROJECT`` against a real Phoenix (issue 42 point 10): the
runs and sessions a project holds, read as ``score --from`` reads them, are the runs the agent's
own requests make; ``--limit`` says when the window holds more."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from backends_support import Phoenix
from test_pull_phoenix import project_traces


def inspect(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``tracescore inspect ARGS`` as a user runs it (piped: JSONL unless ARGS say otherwise)."""
    return subprocess.run([sys.executable, "-m", "collector.cli", "inspect", *args], capture_output=True, text=True,
                          timeout=240, cwd=cwd, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})


def rows(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert done.returncode == 0, done.stderr
    found = [json.loads(line) for line in done.stdout.splitlines()]
    return sorted(({k: v for k, v in row.items() if k != "service"} for row in found),
                  key=lambda r: (r["trace_id"], r["span_id"]))


def test_inspect_from_phoenix_shows_the_runs_and_sessions_the_agent_sent(tmp_path: Path, phoenix: Phoenix) -> None:
    project, files, spans = project_traces(phoenix, tmp_path)
    source = f"phoenix+{phoenix.url}/{project}"
    pulled = inspect("--from", source, "--since", "1h", "--page-size", "3", cwd=tmp_path)
    # Phoenix keeps no resource, so the service is empty; everything else is as sent.
    assert rows(pulled) == rows(inspect(*map(str, files), cwd=tmp_path))
    assert sorted(r["span_id"] for r in rows(pulled)) == sorted(spans)

    sessions = inspect("--from", source, "--sessions", cwd=tmp_path)
    assert sessions.returncode == 0, sessions.stderr
    (conversation,) = [json.loads(line) for line in sessions.stdout.splitlines()]
    assert conversation["turns"] == 2

    table = inspect("--from", source, "--format", "table", cwd=tmp_path)
    assert table.returncode == 0 and f"4 run(s) in 4 trace(s) read from {source}" in table.stderr

    limited = inspect("--from", source, "--limit", "2", "--page-size", "3", cwd=tmp_path)
    assert limited.returncode == 0 and len(limited.stdout.splitlines()) == 2
    assert limited.stderr.strip() == (f"tracescore: read from {source}; stopped at --limit 2: the window holds more "
                                      "(narrow it with --since and --until, or raise --limit)")


def test_inspect_from_an_unknown_project_is_one_line_and_exit_2(tmp_path: Path, phoenix: Phoenix) -> None:
    done = inspect("--from", f"phoenix+{phoenix.url}/no-such-project", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and "no-such-project" in done.stderr
