"""``tracescore demo``: the real daemon scores replayed sample traces, scores come back from a sink.

Checked end to end, in process (``collector.cli.main``) and as ``python -m collector.cli``:
every expected (run, scorer) score is printed with its value, the exit code, and that
nothing is left behind (listening ports closed, temporary queue directory removed), also
when the demo is stopped with Ctrl-C (SIGINT) or SIGTERM.
"""

from __future__ import annotations

import asyncio
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from ports import hold_port  # tests/support
from repo_paths import FIXTURES

import adapters
from collector.cli import main
from collector.commands.demo import samples as demo_samples
from collector.commands.demo.command import _signals_stop
from collector.commands.demo.printer import Outcome
from collector.commands.demo.sink import ReceivedScore, ScoreSink
from collector.common.types import ScoreRecord
from collector.export.evaluation import build_span

SCORERS = ("Keyword Coverage", "Completeness", "Tone Consistency", "check no-tool-errors",
           "check called-tool", "Conversation answered")
LINE = re.compile(r"^  (?P<run>\S+) +(?P<scorer>" + "|".join(SCORERS)
                  + r") +(?P<score>\d\.\d\d)  (?P<label>\S*) +(?P<reason>.*)$")


def _expected() -> dict[tuple[str, str], tuple[str, str]]:
    """(sample or session, scorer) -> (score, label) for the bundled samples."""
    samples = ["openai-v2-multi-turn", "openai-v2-single-turn", "openai-v2-tool-call",
               "openinference-openai", "pydantic-ai", "traceloop"]  # real captures (tests/fixtures)
    expected = {}
    for sample in samples:
        expected[(sample, "Keyword Coverage")] = ("1.00", "pass")
        expected[(sample, "Completeness")] = ("0.86", "complete")
        expected[(sample, "Tone Consistency")] = ("1.00", "")
        expected[(sample, "check no-tool-errors")] = ("1.00", "")
    # "What is my name?" -> "Your name is Ada.": "what" and "my" are not in the answer.
    expected[("openai-v2-multi-turn", "Completeness")] = ("0.60", "partial")
    # Only the tool-call run passes the span-name filter of called_get_weather.
    expected[("openai-v2-tool-call", "check called-tool")] = ("1.00", "")
    # The bundled three-turn conversation: each turn is a run...
    for turn, coverage, completeness, tone in ((1, "0.50", "0.21", "0.94"), (2, "0.50", "0.17", "1.00"),
                                              (3, "1.00", "0.20", "1.00")):
        sample = f"support-conversation-turn{turn}"
        expected[(sample, "Keyword Coverage")] = (coverage, "pass")
        expected[(sample, "Completeness")] = (completeness, "poor")
        expected[(sample, "Tone Consistency")] = (tone, "")
        expected[(sample, "check no-tool-errors")] = ("1.00", "")
    # ...and the conversation is scored once it ended; pydantic-ai's run names a conversation too.
    expected[("session:demo-conversation-1", "Conversation answered")] = ("1.00", "")
    expected[("session:01a23656-8bea-7789-b964-8b6391bbdb63", "Conversation answered")] = ("1.00", "")
    return expected


WAIT = ("--timeout", "120")
"""How long the demo waits for its scores where the test is not about that wait: its 30 s
default is plenty on an idle machine, not on a loaded one (the demo then exits 1)."""


def _scores(out: str) -> dict[tuple[str, str], tuple[str, str]]:
    found: dict[tuple[str, str], tuple[str, str]] = {}
    for line in out.splitlines():
        match = LINE.match(line)
        if match:
            key = (match["run"], match["scorer"])
            assert key not in found, f"score printed twice: {line}"
            found[key] = (match["score"], match["label"])
    return found


def _ports(out: str) -> set[int]:
    ports = {int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)", out)}
    assert len(ports) == 3, out  # daemon gRPC + HTTP, the sink
    return ports


def _assert_closed(ports: set[int]) -> None:
    for port in ports:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()


def _rootless_sample(directory: Path) -> Path:
    """openai-v2 S1 whose root span names a parent that never comes: the daemon holds the
    trace for the demo's ``rootless_wait`` before deciding it."""
    request = adapters.read_trace_file(str(FIXTURES / "openai-v2" / "S1.pb"))
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                if not span.parent_span_id:
                    span.parent_span_id = b"\x07" * 8
    directory.mkdir(exist_ok=True)
    path = directory / "late-root.pb"
    path.write_bytes(request.SerializeToString())
    return path


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private temporary directory for the demo's queue, to check it is removed."""
    directory = tmp_path / "tmp"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    return directory


def test_cli_demo_prints_every_expected_score_and_leaves_nothing_behind(
    capsys: pytest.CaptureFixture[str], private_tmp: Path
) -> None:
    assert main(["demo", *WAIT]) == 0
    out = capsys.readouterr().out
    assert _scores(out) == _expected()
    assert f"embedded SQLite queue in {private_tmp}" in out
    assert "39 scores for 9 of 9 runs and 2 of 2 conversations, 0 failed" in out
    assert "the adapters find 9 agent runs making 2 conversation(s) (scored once each ended), 39 scores to come" in out
    assert "3 of 3 user messages answered, over 3 turns" in out
    assert "reason" in out and "missing: what, my" in out and "get_weather was called" in out
    _assert_closed(_ports(out))
    assert list(private_tmp.iterdir()) == []


def test_tracescore_demo_console_script(tmp_path: Path) -> None:
    # The run's timeout is the hang detector. (A wall-clock bound here timed Python's start-up
    # and imports too, and told nothing apart: a demo that waited out its 30 s timeout would
    # exit 1, missing scores.)
    proc = subprocess.run(
        [sys.executable, "-m", "collector.cli", "demo", *WAIT],
        capture_output=True, text=True, timeout=180,
        env={"COLUMNS": "200", "PATH": "", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TMPDIR": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    assert _scores(proc.stdout) == _expected()
    assert proc.stderr == ""
    _assert_closed(_ports(proc.stdout))
    assert list(tmp_path.iterdir()) == []


def test_samples_option_replays_other_files_including_otlp_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], private_tmp: Path
) -> None:
    samples = tmp_path / "samples"
    samples.mkdir()
    (samples / "mastra.json").write_bytes((FIXTURES / "mastra" / "s1_single_turn.otlp.json").read_bytes())
    (samples / "notes.txt").write_text("not a trace")
    assert main(["demo", "--samples", str(samples), *WAIT]) == 0
    out = capsys.readouterr().out
    assert _scores(out) == {("mastra", "Keyword Coverage"): ("1.00", "pass"),
                            ("mastra", "Completeness"): ("0.86", "complete"),
                            ("mastra", "Tone Consistency"): ("1.00", ""),
                            ("mastra", "check no-tool-errors"): ("1.00", "")}
    assert "service mastra-oracle, span 'invoke_agent assistant'" in out
    assert list(private_tmp.iterdir()) == []


def test_scores_that_do_not_come_in_time_fail_the_demo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], private_tmp: Path
) -> None:
    # The late-root trace is decided after rootless_wait (2 s); the demo waits 0.2 s.
    assert demo_samples.ROOTLESS_WAIT_S > 1
    samples = _rootless_sample(tmp_path / "samples").parent
    assert main(["demo", "--samples", str(samples), "--timeout", "0.2"]) == 1
    out = capsys.readouterr().out
    assert "timed out: 0 of 4 expected scores arrived" in out
    _assert_closed(_ports(out))
    assert list(private_tmp.iterdir()) == []


SCORER_FILE = """
from scorers import create_scorer, not_scorable


def _boom(run):
    raise RuntimeError("scorer exploded")


broken = create_scorer(id="broken", name="Broken", description="fails", type="agent").generate_score(_boom)
no_answer = create_scorer(id="no-answer", name="No answer", description="never scorable",
                          type="agent").generate_score(lambda run: not_scorable("nothing to judge"))
"""


@pytest.fixture
def extra_scorer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """Register one more scorer (from a file) next to the demo's own."""
    path = tmp_path / "extra_scorers.py"
    path.write_text(SCORER_FILE)

    def register(name: str) -> None:
        monkeypatch.setattr(demo_samples, "SCORERS", [*demo_samples.SCORERS, {"ref": f"{path}:{name}"}])

    return register


def test_a_failing_scorer_is_printed_with_its_error_type_and_fails_the_demo(
    capsys: pytest.CaptureFixture[str], private_tmp: Path, extra_scorer: Callable[[str], None]
) -> None:
    extra_scorer("broken")
    assert main(["demo", *WAIT]) == 1
    out = capsys.readouterr().out
    assert _scores(out) == _expected()
    failures = [line for line in out.splitlines() if re.match(r"^  \S+ +Broken +error ", line)]
    assert len(failures) == 9
    assert all(line.endswith("RuntimeError: Scorer Run Failed: scorer exploded") for line in failures)
    assert "48 scores for 9 of 9 runs and 2 of 2 conversations, 9 failed, in" in out
    assert list(private_tmp.iterdir()) == []


def test_runs_found_not_scorable_are_counted_not_awaited(
    capsys: pytest.CaptureFixture[str], private_tmp: Path, extra_scorer: Callable[[str], None]
) -> None:
    extra_scorer("no_answer")
    started = time.monotonic()
    assert main(["demo", "--timeout", "120"]) == 0
    # Not waited for until the timeout: half of it leaves a busy machine room.
    assert time.monotonic() - started < 60
    out = capsys.readouterr().out
    assert _scores(out) == _expected()
    assert "No answer" not in out.split("reason", 1)[1]
    assert "39 scores for 9 of 9 runs and 2 of 2 conversations, 0 failed, 9 not scorable, in" in out


def test_loopback_traffic_bypasses_a_proxy_of_the_environment(
    capsys: pytest.CaptureFixture[str], private_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A proxy address where nothing listens: held (bound, never listening) for the whole run,
    # so no other test's server can take the port meanwhile.
    holder = hold_port()
    proxy = f"http://127.0.0.1:{holder.getsockname()[1]}"
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "grpc_proxy"):
        monkeypatch.setenv(name, proxy)
    monkeypatch.setenv("no_proxy", "internal.example")
    monkeypatch.delenv("no_grpc_proxy", raising=False)
    try:
        assert main(["demo", *WAIT]) == 0
    finally:
        holder.close()
    assert _scores(capsys.readouterr().out) == _expected()
    assert os.environ["no_proxy"] == "internal.example" and "no_grpc_proxy" not in os.environ


def test_bad_sample_files_are_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--samples", str(tmp_path)]) == 2
    assert f"tracescore demo: {tmp_path}: no OTLP trace files" in capsys.readouterr().err
    assert main(["demo", "--samples", str(tmp_path / "missing")]) == 2
    assert "missing: not a directory" in capsys.readouterr().err
    (tmp_path / "broken.pb").write_bytes(b"\xff\xff not protobuf")
    assert main(["demo", "--samples", str(tmp_path)]) == 2
    assert "broken.pb" in capsys.readouterr().err


def _read_until(proc: subprocess.Popen[str], marker: str, deadline: float) -> str:
    assert proc.stdout is not None
    seen = ""
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while marker not in seen:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {marker!r} in time; got:\n{seen}"
            if selector.select(timeout=remaining):
                line = proc.stdout.readline()
                assert line, f"demo exited before {marker!r}:\n{seen}"
                seen += line
    return seen


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_demo_cleanly(tmp_path: Path, signum: signal.Signals) -> None:
    samples = _rootless_sample(tmp_path / "samples").parent
    private = tmp_path / "tmp"
    private.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "collector.cli", "demo", "--samples", str(samples), "--timeout", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={"COLUMNS": "200", "PATH": "", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TMPDIR": str(private),
             "PYTHONUNBUFFERED": "1"},
    )
    try:
        # The column titles come after the replay; the late-root trace keeps the daemon busy.
        # Signalled only once running (the marker), so the assertions below are about a running
        # demo; both waits are bounded generously (start-up and exit on a busy machine).
        head = _read_until(proc, "reason", time.monotonic() + 120)
        assert any(private.iterdir())  # the running daemon's queue
        proc.send_signal(signum)
        rest, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert "interrupted; the daemon stopped" in rest
    assert "Traceback" not in err
    _assert_closed(_ports(head))
    assert list(private.iterdir()) == []



@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_a_signal_marks_the_demo_interrupted_even_when_its_cancellation_is_swallowed(
    signum: signal.Signals,
) -> None:
    """A cancellation landing as ``asyncio.wait_for`` completes is lost on Python 3.11 (the demo
    once ran to completion after Ctrl-C and exited 0): the mark still says interrupted."""
    outcome = Outcome(expected=1)
    cancelled = asyncio.Event()

    async def swallowing() -> None:
        with _signals_stop(asyncio.current_task(), outcome):
            os.kill(os.getpid(), signum)
            try:
                async with asyncio.timeout(10):
                    await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.set()  # and carries on, as if the cancellation had been swallowed

    await asyncio.create_task(swallowing())
    assert outcome.interrupted and cancelled.is_set()

async def test_the_sink_reads_the_score_spans_the_daemon_exports() -> None:
    ok = ScoreRecord("k1", "ab" * 16, "cd" * 8, "ef" * 8, "q", "Quality", score=0.75, label="good",
                     reason="fine", service="bot", start_ns=1, end_ns=2)
    failed = ScoreRecord("k2", "ab" * 16, "cd" * 8, "12" * 8, "b", "Broken", error_type="RuntimeError",
                         error_message="boom", service="bot", start_ns=1, end_ns=2)
    sink = await ScoreSink().start()
    try:
        exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{sink.port}", insecure=True, timeout=5)
        try:
            spans = [build_span(ok), build_span(failed)]
            assert (await asyncio.to_thread(exporter.export, spans)).name == "SUCCESS"
        finally:
            exporter.shutdown()
        arrived = await sink.arrivals(timeout=5)
    finally:
        await sink.stop()
    assert arrived == [
        ReceivedScore("ab" * 16, "cd" * 8, "q", "Quality", 0.75, "good", "fine", service="bot"),
        ReceivedScore("ab" * 16, "cd" * 8, "b", "Broken", None, error_type="RuntimeError",
                      error_message="boom", service="bot"),
    ]
    assert sink.forwarded_spans == 0
    _assert_closed({sink.port})
