"""Where `tracescore inspect` reads from (issue 42 point 10): FILEs or directories, whose summary
counts the files actually read, or ``--from URL``; neither, or both, is one line saying what it takes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from repo_paths import FIXTURES

from collector.cli import main


def test_inspect_of_a_directory_counts_the_files_it_read(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "otlp"
    (folder / "older").mkdir(parents=True)
    for name in ("S1.pb", "S2.pb"):
        shutil.copy(FIXTURES / "openai-v2" / name, folder / name)
    shutil.copy(FIXTURES / "traceloop" / "S1.json", folder / "older" / "S1.json")
    (folder / "broken.pb").write_bytes(b"\xff\xff\xff")
    (folder / "notes.txt").write_text("not OTLP")
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["inspect", str(folder), "--format", "table"]) == 1  # one file could not be read
    err = capsys.readouterr().err
    assert "3 run(s) in 3 trace(s) from 3 file(s); 1 file(s) unreadable" in err and "broken.pb" in err


@pytest.mark.parametrize(("argv", "says"), [
    ([], "tracescore: inspect takes FILE... (saved OTLP requests: see the README's \"Saved OTLP files\") or "
         "--from URL\n"),
    (["a.pb", "--from", "phoenix+http://127.0.0.1:9/p"],
     "tracescore: inspect takes FILE... (saved OTLP requests: see the README's \"Saved OTLP files\") or "
     "--from URL, not both\n"),
    (["--from", "phoenix+http://127.0.0.1:9/p", "--since", "last week"],
     "tracescore: --since 'last week': expected an ISO 8601 time (2026-12-01T00:00:00Z) or a duration back from "
     "now (30m, 12h, 7d, 2w)\n"),
])
def test_inspect_needs_files_or_a_backend(capsys: pytest.CaptureFixture[str], argv: list[str], says: str) -> None:
    assert main(["inspect", *argv]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", says)
