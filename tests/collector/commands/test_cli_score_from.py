"""``tracescore score --from`` before any request: arguments, configuration and the cursor file
(`collector.commands.score_from`, `collector.receive.pull.cursor`). Reading real backends is in
``tests/backends/test_pull_*.py`` and ``tests/integration/test_pull_langfuse.py``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from collector.cli import main
from collector.common.errors import ConfigError
from collector.receive.pull import cursor as cursors
from collector.receive.pull.source import Window

SCORER = "scorers.builtin:completeness"


def score(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    code = main(["score", *args, "--scorer", SCORER, "--format", "jsonl"])
    captured = capsys.readouterr()
    return code, captured.err.strip().splitlines(), captured.out


@pytest.mark.parametrize(("args", "line"), [
    ((), "tracescore: score takes FILE... or --from URL"),
    (("a.pb", "--from", "phoenix+http://127.0.0.1:9/p"), "tracescore: score takes FILE... or --from URL, not both"),
    (("--from", "zipkin+http://127.0.0.1:9411"),
     "tracescore: --from zipkin+http://127.0.0.1:9411: expected the backend phoenix, mlflow or langfuse, not 'zipkin' "
     "(the backend, '+', then the server's http(s) URL: phoenix+http://HOST:6006/PROJECT, "
     "mlflow+http://HOST:5000/EXPERIMENT_ID or langfuse+https://HOST)"),
    (("--from", "phoenix://127.0.0.1:9/support-bot"),
     "tracescore: --from phoenix://127.0.0.1:9/support-bot: write phoenix+http://127.0.0.1:9/support-bot "
     "(the backend, '+', then the server's http(s) URL: phoenix+http://HOST:6006/PROJECT, "
     "mlflow+http://HOST:5000/EXPERIMENT_ID or langfuse+https://HOST)"),
    (("--from", "mlflow+http://u:s3cret@127.0.0.1:5000"),
     "tracescore: --from mlflow+http://u:***@127.0.0.1:5000: name the experiment id, as "
     "mlflow+http://host:5000/<experiment id>"),
    (("--from", "phoenix+http://127.0.0.1:9/p", "--since", "last week"),
     "tracescore: --since 'last week': expected an ISO 8601 time (2026-12-01T00:00:00Z) or a duration back from "
     "now (30m, 12h, 7d, 2w)"),
    (("--from", "phoenix+http://127.0.0.1:9/p", "--since", "2026-12-02", "--until", "2026-12-01"),
     "tracescore: --since 2026-12-02T00:00:00+00:00 is not before --until 2026-12-01T00:00:00+00:00"),
])
def test_bad_input_is_one_line_and_exit_2_before_any_request(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        args: tuple[str, ...], line: str) -> None:
    monkeypatch.chdir(tmp_path)
    code, err, out = score(capsys, *args)
    assert (code, err, out) == (2, [line], "")
    assert not (tmp_path / ".tracescore").exists()


def test_langfuse_keys_must_be_set(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LANGFUSE_PUBLIC_KEY", raising=False)
    code, err, _ = score(capsys, "--from", "langfuse+http://127.0.0.1:9")
    assert (code, err) == (2, ["tracescore: invalid configuration: sinks.langfuse.public_key: environment "
                               "variable LANGFUSE_PUBLIC_KEY is not set"])


def test_a_complete_backfill_resumed_does_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    cursors.save(path, cursors.Cursor("phoenix+http://127.0.0.1:9/p", None, (SCORER,), traces=12, done=True))
    code, err, out = score(capsys, "--from", "phoenix+http://127.0.0.1:9/p", "--resume", "--cursor", str(path))
    assert (code, out) == (0, "")
    assert err == [f"tracescore: the backfill in {path} is complete (12 trace(s)); nothing to do"]


def test_a_cursor_of_another_backfill_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    cursors.save(path, cursors.Cursor("phoenix+http://127.0.0.1:9/other", None, (SCORER,), pages=2))
    code, err, _ = score(capsys, "--from", "phoenix+http://127.0.0.1:9/p", "--resume", "--cursor", str(path))
    assert code == 2
    assert err == [f"tracescore: --cursor {path} was written by another backfill (phoenix+http://127.0.0.1:9/other, "
                   f"filter None, scorers {SCORER})"]


def test_a_file_that_is_not_a_cursor_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text('{"pages": "many"}')
    with pytest.raises(ConfigError, match="not a tracescore cursor file"):
        cursors.load(path)


def test_a_cursor_is_written_whole_or_not_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state" / "c.json"
    first = cursors.Cursor("mlflow+http://h/1", "tag.a = '1'", ("q",), Window(), token="t1", pages=1, traces=100)
    cursors.save(path, first)

    def crash(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        cursors.save(path, first.advanced("t2", 100))
    monkeypatch.undo()
    assert cursors.load(path) == first  # the old cursor, whole
    assert sorted(p.name for p in path.parent.iterdir()) == ["c.json"]  # no temporary file left


def test_the_default_cursor_lives_beside_the_state_dir_and_names_the_backfill(tmp_path: Path) -> None:
    a = cursors.default_path("phoenix+http://h/p", None, ["m:q"], tmp_path)
    assert a.parent == tmp_path / ".tracescore" / "backfill"
    assert a != cursors.default_path("phoenix+http://h/p", "x", ["m:q"], tmp_path)
    assert a != cursors.default_path("phoenix+http://h/p", None, ["m:r"], tmp_path)
