"""Tables never cut a number or a name (issue 42 point 11): on an 80-column terminal (a real
pseudo-terminal, COLUMNS=80) `score --estimate` and `dead-letters list` fit every line in 80
columns with every digit and name whole, and a dead letter takes a few lines, not twenty; piped,
the tables are as wide as their cells need, whatever COLUMNS says."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import io
import os
import pty
import re
import struct
import sys
import termios
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from repo_paths import FIXTURES

from collector.cli import main
from collector.common.types import Dead, RunRecord, ScoreJob, ScoreRecord
from collector.store.sqlite.store import SqliteStore

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
RUN_FILES = sorted(str(p) for p in FIXTURES.glob("*/S*.pb"))

JUDGED = '''from scorers.builtin import answer_relevancy, conversation_completeness

SETTINGS = {"api_base": "http://127.0.0.1:9/v1", "api_key": "k"}  # --estimate sends nothing
relevancy = answer_relevancy({"model": "openai/gpt-4o-mini", "model_settings": SETTINGS})
completeness = conversation_completeness({"model": "openai/gpt-4o-mini", "model_settings": SETTINGS})
'''
ERROR = ("Judge model 'openai/gpt-4o-mini' has no credentials: the environment does not set OPENAI_API_KEY (or "
         "give model_settings api_key); not retried: litellm.AuthenticationError: Missing credentials")


@contextlib.contextmanager
def terminal(columns: int, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """stdout and stderr on one pseudo-terminal ``columns`` wide, for the CLI run inside; yields
    the list that receives the lines it printed (ANSI escapes removed) once the block ends."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the slave side closed
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    tty = open(slave, "w", encoding="utf-8", closefd=True)  # noqa: SIM115 (closed below)
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setattr(sys, "stdout", tty)
    monkeypatch.setattr(sys, "stderr", tty)
    lines: list[str] = []
    try:
        yield lines
    finally:
        tty.flush()
        monkeypatch.undo()
        tty.close()
        reader.join(timeout=10)
        os.close(master)
        text = ANSI.sub("", b"".join(chunks).decode("utf-8", "replace"))
        lines.extend(line for line in text.split("\n") if line.strip())


def piped(monkeypatch: pytest.MonkeyPatch, columns: int = 80) -> tuple[io.StringIO, io.StringIO]:
    """stdout and stderr as pipes are (not terminals), with COLUMNS set as a terminal's would be."""
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    return out, err


def estimate(tmp_path: Path) -> list[str]:
    module = tmp_path / "judged.py"
    module.write_text(JUDGED)
    return ["score", *RUN_FILES, "--scorer", f"{module}:relevancy", "--scorer", f"{module}:completeness",
            "--scorer", "scorers.builtin:completeness", "--estimate"]


def test_score_estimate_at_80_columns_cuts_no_number_or_name(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    with terminal(80, monkeypatch) as lines:
        assert main(estimate(tmp_path)) == 0
    start = lines.index("judge cost estimate (nothing was sent)")
    table = lines[start:]
    assert all(len(line) <= 80 for line in table), table
    assert not any("…" in line for line in table)
    for scorer in ("answer-relevancy", "conversation-completeness", "completeness", "total"):
        assert f"scorer: {scorer}" in table
    record = " ".join(table[table.index("scorer: answer-relevancy") + 1:table.index("scorer: conversation-completeness")])
    assert re.search(r"runs: 10; judge calls: 30; prompt tokens: [\d,]+; output tokens: [\d,]+", record)
    assert re.search(r"USD: 0\.\d{6}; worst-case output tokens: 30,720; worst-case USD: 0\.\d{6}", record)

    out, err = piped(monkeypatch)
    assert main(estimate(tmp_path)) == 0
    monkeypatch.undo()
    table = out.getvalue().splitlines()
    assert "…" not in out.getvalue() and max(len(line) for line in table) > 80  # as wide as it needs
    (row,) = [line for line in table if "answer-relevancy" in line]
    assert re.search(r"│ answer-relevancy +│ +10 │ +30 │ +[\d,]+ │ +[\d,]+ │ +0\.\d{6} │ +30,720 │ +0\.\d{6} │", row)


async def _dead_letters(path: Path, count: int) -> None:
    """``count`` dead letters in the SQLite store at ``path``, as a worker leaves them."""
    store = SqliteStore(str(path))
    await store.start()
    try:
        jobs = [ScoreJob(RunRecord("ab" * 16, f"{n:016x}", "invoke_agent"), "answer-relevancy", "1")
                for n in range(count)]
        await store.put(jobs)
        leased: list = []
        while len(leased) < count:
            leased += await store.take(count - len(leased))
        for lease in leased:
            failure = ScoreRecord(lease.job.key, lease.job.run.trace_id, lease.job.run.span_id, "ef" * 8,
                                  "answer-relevancy", "answer-relevancy", score=None,
                                  error_type="JudgeCredentialsError")
            await store.settle(lease, Dead("JudgeCredentialsError", ERROR, failure, traceback="Traceback ..."))
    finally:
        await store.shutdown()


def test_dead_letters_list_at_80_columns_is_a_few_lines_per_letter(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    asyncio.run(_dead_letters(tmp_path / "q.db", 3))
    config = tmp_path / "ts.toml"
    config.write_text(f'[queue]\nurl = "sqlite:///{tmp_path / "q.db"}"\n')
    with terminal(80, monkeypatch) as lines:
        assert main(["dead-letters", "list", "--config", str(config)]) == 0
    assert lines[0] == "3 dead letter(s)"
    assert all(len(line) <= 80 for line in lines) and not any("…" in line for line in lines)
    letters = [i for i, line in enumerate(lines) if line.startswith("id: ")]
    assert len(letters) == 3 and len(lines) - 1 <= 3 * 7  # 17 lines a letter before
    first = lines[letters[0]:letters[1]]
    assert "  failed at: " in first[1] and first[1].endswith("; scorer: answer-relevancy")
    assert first[2] == f"  trace / span: {'ab' * 16} {0:016x}"
    assert " ".join(line.strip() for line in first[3:]) == f"error: JudgeCredentialsError: {ERROR}"

    out, _ = piped(monkeypatch)
    assert main(["dead-letters", "list", "--config", str(config)]) == 0
    monkeypatch.undo()
    rows = [line for line in out.getvalue().splitlines() if "answer-relevancy" in line]
    assert len(rows) == 3 and all(f"JudgeCredentialsError: {ERROR}" in row for row in rows)  # one line each
