"""Conversations in saved files (SPEC §7, offline): `inspect` shows each run's session key and
`--sessions` the conversations; `score` gives conversation scorers the sessions, grouped by
service and key, their turns in order, with no idle wait."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conversation_traces import TURNS, turn_body

from collector.cli import main

COUNTER = '''from scorers import create_scorer

user_turns = create_scorer(id="user_turns", description="how many user messages the conversation has",
                           type="conversation").generate_score(lambda run: float(len(run.input.input_messages)))
last_words = create_scorer(id="last_words", description="the transcript's last entry",
                           type="conversation").generate_score(lambda run: 1.0).generate_reason(
    lambda run, score: f"{run.session_id} r{run.revision} {len(run.turns)} turns: {run.conversation[-1]['content']}")
answered = create_scorer(id="answered", description="the run has an answer", type="agent"
                         ).generate_score(lambda run: float(bool(run.output)))
'''


def _write(folder: Path, name: str, body: bytes) -> str:
    path = folder / name
    path.write_bytes(body)
    return str(path)


@pytest.fixture
def conversation_files(tmp_path: Path) -> tuple[list[str], list[str]]:
    """Turns 3, 1, 2 of one session (files out of order), the same key in another service, and
    a run without a session; the files and the session's trace ids in turn order."""
    bodies = [turn_body("chat-7", i) for i in range(3)]
    files = [_write(tmp_path, f"turn{i}.pb", bodies[i][0]) for i in (2, 0, 1)]
    files.append(_write(tmp_path, "other.pb", turn_body("chat-7", 0, service="billing-bot")[0]))
    files.append(_write(tmp_path, "alone.pb", turn_body(None, 0)[0]))
    return files, [trace_id for _, trace_id, _ in bodies]


def _rows(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_inspect_rows_name_the_session_of_each_turn(conversation_files, capsys: pytest.CaptureFixture[str]) -> None:
    files, _ = conversation_files
    assert main(["inspect", *files, "--format", "jsonl"]) == 0
    rows = _rows(capsys.readouterr().out)
    # a run without a session keeps SPEC §3's row as it is: no session_id key at all
    assert sorted(row.get("session_id", "-") for row in rows) == ["-", "chat-7", "chat-7", "chat-7", "chat-7"]


def test_inspect_sessions_lists_each_conversation_by_service_and_key(conversation_files,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    files, trace_ids = conversation_files
    assert main(["inspect", *files, "--sessions", "--format", "jsonl"]) == 0
    rows = {row["service"]: row for row in _rows(capsys.readouterr().out)}
    assert set(rows) == {"support-bot", "billing-bot"}
    support = rows["support-bot"]
    assert (support["session_id"], support["turns"], support["traces"]) == ("chat-7", 3, trace_ids)
    assert support["first"] <= support["last"] and support["first"].endswith("Z")
    assert rows["billing-bot"]["turns"] == 1
    assert main(["inspect", *files, "--sessions", "--format", "table"]) == 0
    assert "2 session(s); 1 run(s) without a session key" in capsys.readouterr().out


def test_a_session_key_named_on_the_command_line_and_found_on_the_root_span(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    file = _write(tmp_path, "t.pb", turn_body("thread-1", 0, key="thread.id", on_root=True)[0])
    assert main(["inspect", file, "--format", "jsonl"]) == 0
    assert "session_id" not in _rows(capsys.readouterr().out)[0]  # not a standard key
    assert main(["inspect", file, "--format", "jsonl", "--session-key", "thread.id"]) == 0
    assert _rows(capsys.readouterr().out)[0]["session_id"] == "thread-1"


def test_score_gives_conversation_scorers_the_sessions_and_run_scorers_the_runs(
    conversation_files, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    files, trace_ids = conversation_files
    (tmp_path / "convo_scorers.py").write_text(COUNTER)
    monkeypatch.syspath_prepend(str(tmp_path))
    code = main(["score", *files, "--format", "jsonl", "--scorer", "convo_scorers:user_turns",
                 "--scorer", "convo_scorers:last_words", "--scorer", "convo_scorers:answered"])
    assert code == 0
    rows = _rows(capsys.readouterr().out)
    by_scorer: dict[str, list[dict]] = {}
    for row in rows:
        by_scorer.setdefault(row["scorer"], []).append(row)
    assert len(by_scorer["answered"]) == 5 and all("session_id" not in r for r in by_scorer["answered"])
    support = next(r for r in by_scorer["user_turns"] if r["service"] == "support-bot")
    # the history each turn repeats is not new: three user messages, in order
    assert support["score"] == 3.0 and support["session_id"] == "chat-7"
    assert [m["content"] for m in support["input"]["input_messages"]] == [q for q, _ in TURNS]
    assert support["trace_id"] == trace_ids[-1]  # the score lands on the last turn
    assert sorted(r["score"] for r in by_scorer["user_turns"]) == [1.0, 3.0]
    reason = next(r["reason"] for r in by_scorer["last_words"] if r["service"] == "support-bot")
    assert reason == f"chat-7 r1 3 turns: {TURNS[-1][1]}"


def test_score_leaves_sessions_under_min_turns_unscored_and_says_so(
    conversation_files, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the config's ``[sessions] min_turns = 2``, the one-turn conversation (the same key in
    another service) is not scored, and stderr counts it; the runs are all scored."""
    files, _ = conversation_files
    (tmp_path / "convo_scorers.py").write_text(COUNTER)
    (tmp_path / "ts.toml").write_text("[sessions]\nmin_turns = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    code = main(["score", *files, "--format", "jsonl", "--scorer", "convo_scorers:user_turns",
                 "--scorer", "convo_scorers:answered", "--export", "--config", str(tmp_path / "ts.toml")])
    assert code == 0
    out, err = capsys.readouterr()
    rows = _rows(out)
    assert [(r["service"], r["session_id"]) for r in rows if r["scorer"] == "user_turns"] == [("support-bot", "chat-7")]
    assert sum(r["scorer"] == "answered" for r in rows) == 5
    assert "1 session(s) of fewer turns than [sessions] min_turns: not scored" in err
