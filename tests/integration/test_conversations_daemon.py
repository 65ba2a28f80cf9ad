"""Conversations scored by the daemon (SPEC §7), on both stores: the turns of a session
arrive as separate traces; a session is scored once, on its last turn, at once after an
end marker or `idle_s` after its last turn arrived (not after its decision); a late turn
reopens it and the next revision is scored; run scorers go on scoring the runs; a session
shorter than ``min_turns`` is counted, not scored. On Redis, the turns arrive at two receivers
over gRPC and HTTP, and one receiver is SIGKILLed mid-session."""

from __future__ import annotations

import asyncio
import json
import signal
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TypeVar

import aiohttp
import pytest
import pytest_asyncio
from conversation_traces import TURNS, emit_turn, turn_body, without_root
from daemon_harness import CaptureBackend, CapturedSpan, delete_redis_keys, free_port, wait_until
from serve_process import ServeProcess, cli
from shared_redis import REDIS_URL

PROTOBUF = {"Content-Type": "application/x-protobuf"}
T = TypeVar("T")

SCORERS = '''from scorers import create_scorer

user_turns = create_scorer(id="user_turns", description="user messages in the conversation",
                           type="conversation").generate_score(lambda run: float(len(run.input.input_messages)))
answered = create_scorer(id="answered", description="the run has an answer", type="agent"
                         ).generate_score(lambda run: float(bool(run.output)))
'''


def _config(tmp_path: Path, backend: CaptureBackend, url: str, prefix: str, http_port: int, grpc_port: int = 0,
            name: str = "tracescore", idle_s: float = 1.5, partitions: int = 1, decision_wait: float = 0.3,
            min_turns: int = 1) -> Path:
    (tmp_path / "convo_scorers.py").write_text(SCORERS)
    grpc = f'"127.0.0.1:{grpc_port}"' if grpc_port else '""'
    config = tmp_path / f"{name}.toml"
    config.write_text(
        f'[receiver]\ngrpc_endpoint = {grpc}\nhttp_endpoint = "127.0.0.1:{http_port}"\n'
        f'[workers]\nhttp_endpoint = "127.0.0.1:{http_port}"\n'  # a worker's own listener
        f'[assembly]\ndecision_wait = {decision_wait}\nrootless_wait = {max(1.0, decision_wait)}\n'
        f'[sessions]\nidle_s = {idle_s}\nmin_turns = {min_turns}\n'
        f'[queue]\nurl = "{url}"\nkey_prefix = "{prefix}"\nvisibility_timeout_s = 5\n'
        + (f'partitions = {partitions}\n' if partitions > 1 else "") +
        f'[export]\nendpoint = "{backend.endpoint}"\nforward_spans = false\ntimeout_s = 2.0\nmax_backoff_s = 0.5\n'
        f'[[scorers]]\nref = "{tmp_path / "convo_scorers.py"}:user_turns"\n'
        f'[[scorers]]\nref = "{tmp_path / "convo_scorers.py"}:answered"\n'
    )
    return config


async def _post(http_port: int, body: bytes) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.post(f"http://127.0.0.1:{http_port}/v1/traces", data=body, headers=PROTOBUF) as resp:
            assert resp.status == 200, await resp.text()


def _session_scores(backend: CaptureBackend, session_id: str) -> list[CapturedSpan]:
    return [s for s in backend.scores() if s.attributes.get("session.id") == session_id]


SCORED_SESSIONS = 'tracescore_decisions_total{reason="scored",scorer="user_turns"}'


def _sample(metrics: str, series: str) -> float:
    """The value of ``series`` (name and labels, as exposed) in a /metrics text; 0 when absent."""
    values = [float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines() if line.startswith(series + " ")]
    return values[0] if values else 0.0


def shared(test: T) -> T:
    """A test on `one_daemon`: it runs on the module's event loop, where that daemon's backend
    serves, and in one xdist worker with the module's other such tests (one daemon per store)."""
    return pytest.mark.xdist_group("conversations-one-daemon")(pytest.mark.asyncio(loop_scope="module")(test))


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["sqlite", "redis", "redis-partitioned"])
async def one_daemon(request: pytest.FixtureRequest,
                     tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[ServeProcess, CaptureBackend]]:
    """One daemon per store for the module's tests (each its own session ids and traces): a
    daemon start costs about a second of CPU, and several on a loaded machine."""
    tmp_path = tmp_path_factory.mktemp(f"one-daemon-{request.param}")
    backend = await CaptureBackend().start()
    prefix = f"test-{uuid.uuid4().hex[:12]}:"
    url = f"sqlite:///{tmp_path / 'queue.db'}" if request.param == "sqlite" else REDIS_URL
    partitions = 3 if request.param == "redis-partitioned" else 1
    http_port = free_port()
    serve = ServeProcess(_config(tmp_path, backend, url, prefix, http_port, partitions=partitions),
                         tmp_path / "daemon.log", http_port)
    await serve.start()
    yield serve, backend
    await serve.kill()
    await backend.stop()
    if request.param != "sqlite":
        await delete_redis_keys(REDIS_URL, prefix, partitions)


@shared
async def test_an_ended_session_is_scored_once_on_its_last_turn_and_a_late_turn_scores_it_again(
    one_daemon: tuple[ServeProcess, CaptureBackend],
) -> None:
    serve, backend = one_daemon
    scored_before = _sample(await serve.metrics(), SCORED_SESSIONS)  # the module's other tests' sessions
    session_id = f"chat-{uuid.uuid4().hex[:8]}"
    turns = [turn_body(session_id, i, end=(i == 2)) for i in range(3)]
    traces = {trace for _, trace, _ in turns}
    for body, _, _ in turns:
        await _post(serve.http_port, body)
    await wait_until(lambda: len(_session_scores(backend, session_id)) == 1, timeout=30, what="the session's score")
    (score,) = _session_scores(backend, session_id)
    _, last_trace, last_span = turns[-1]
    assert (score.span.trace_id.hex(), score.span.parent_span_id.hex()) == (last_trace, last_span)
    assert score.attributes["gen_ai.evaluation.score.value"] == 3.0  # three user messages, history not repeated
    assert score.attributes["tracescore.session.turns"] == 3
    assert score.attributes["tracescore.session.revision"] == 1
    assert score.attributes["gen_ai.conversation.id"] == session_id
    await wait_until(lambda: sum(s.attributes.get("tracescore.scorer.id") == "answered"
                                 and s.span.trace_id.hex() in traces for s in backend.scores()) == 3,
                     timeout=30, what="the runs' scores")  # run scorers still score every turn
    # the end marker made it due at once, not the idle timer
    assert f"session support-bot/{session_id} (3 turn(s), revision 1) due: ended" in serve.log.read_text()
    # -v names the session a conversation score is of (issue 42 point 13)
    assert (f"scored user_turns on session '{session_id}' (revision 1; last turn: trace {last_trace} span "
            f"{last_span}): 3.0 (") in serve.log.read_text()

    late_turns = (*TURNS, ("One more thing: gift wrap it?", "Gift wrapped, Ann."))
    late, late_trace, late_span = turn_body(session_id, 3, turns=late_turns)
    await _post(serve.http_port, late)
    await wait_until(lambda: len(_session_scores(backend, session_id)) == 2, timeout=30, what="the second revision")
    second = next(s for s in _session_scores(backend, session_id) if s.attributes["tracescore.session.revision"] == 2)
    assert (second.span.trace_id.hex(), second.span.parent_span_id.hex()) == (late_trace, late_span)
    assert second.attributes["tracescore.session.turns"] == 4
    assert second.attributes["gen_ai.evaluation.score.value"] == 4.0
    text = await serve.metrics()
    assert _sample(text, SCORED_SESSIONS) - scored_before == 2.0
    await asyncio.sleep(2.5)  # idle_s passed again: nothing new comes (scored once per revision)
    assert len(_session_scores(backend, session_id)) == 2


@shared
async def test_an_idle_session_is_scored_idle_s_after_its_last_turn(one_daemon: tuple[ServeProcess, CaptureBackend]) -> None:
    serve, backend = one_daemon
    session_id = f"idle-{uuid.uuid4().hex[:8]}"
    for i in range(2):
        await _post(serve.http_port, turn_body(session_id, i)[0])
    sent = time.monotonic()
    await wait_until(lambda: len(_session_scores(backend, session_id)) == 1, timeout=30, what="the idle session's score")
    waited = time.monotonic() - sent
    (score,) = _session_scores(backend, session_id)
    assert score.attributes["tracescore.session.turns"] == 2
    assert waited >= 1.5  # not before idle_s
    text = await serve.metrics()
    assert 'tracescore_sessions{state="scored"}' in text


@shared
async def test_a_turn_whose_trace_never_completes_is_scored_with_the_others_as_partial(
    one_daemon: tuple[ServeProcess, CaptureBackend],
) -> None:
    """The last turn's root span never arrives: its trace is decided after rootless_wait, and the
    session is scored with its three turns, marked partial."""
    serve, backend = one_daemon
    session_id = f"broken-{uuid.uuid4().hex[:8]}"
    for i in range(2):
        await _post(serve.http_port, turn_body(session_id, i)[0])
    await _post(serve.http_port, without_root(turn_body(session_id, 2, wrapped=True, end=True)[0]))
    await wait_until(lambda: len(_session_scores(backend, session_id)) == 1, timeout=30, what="the session's score")
    (score,) = _session_scores(backend, session_id)
    assert score.attributes["tracescore.session.turns"] == 3
    assert score.attributes["tracescore.session.partial"] is True


async def test_turns_at_two_redis_receivers_one_killed_mid_session_make_one_session(tmp_path: Path) -> None:
    """Turn 1 over gRPC to receiver A, which is then SIGKILLed; turns 2 and 3 over HTTP to
    receiver B; one worker. The session is scored once, with its three turns."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    backend = await CaptureBackend().start()
    prefix = f"test-{uuid.uuid4().hex[:12]}:"
    ports = {name: free_port() for name in ("a_http", "a_grpc", "b_http", "w_http")}
    procs = {
        "a": ServeProcess(_config(tmp_path, backend, REDIS_URL, prefix, ports["a_http"], ports["a_grpc"], "a"),
                          tmp_path / "a.log", ports["a_http"], flags=("-v", "--role", "receiver")),
        "b": ServeProcess(_config(tmp_path, backend, REDIS_URL, prefix, ports["b_http"], name="b"),
                          tmp_path / "b.log", ports["b_http"], flags=("-v", "--role", "receiver")),
        "w": ServeProcess(_config(tmp_path, backend, REDIS_URL, prefix, ports["w_http"], name="w"),
                          tmp_path / "w.log", ports["w_http"], flags=("-v", "--role", "worker")),
    }
    session_id = f"two-{uuid.uuid4().hex[:8]}"
    try:
        for proc in procs.values():
            await proc.start()
        exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{ports['a_grpc']}", insecure=True, timeout=10)
        await asyncio.to_thread(emit_turn, exporter, session_id, 0)  # the SDK's gRPC exporter
        assert procs["a"].proc is not None
        procs["a"].proc.send_signal(signal.SIGKILL)
        await procs["a"].proc.wait()
        procs["a"].proc = None
        for i in (1, 2):
            await _post(ports["b_http"], turn_body(session_id, i, end=(i == 2))[0])
        await wait_until(lambda: len(_session_scores(backend, session_id)) == 1, timeout=45, what="the session's score")
        await asyncio.sleep(2.5)  # past idle_s: it is not scored a second time
        (score,) = _session_scores(backend, session_id)
        assert score.attributes["tracescore.session.turns"] == 3
        assert score.attributes["gen_ai.evaluation.score.value"] == 3.0
    finally:
        for proc in procs.values():
            await proc.kill()
        await backend.stop()
        await delete_redis_keys(REDIS_URL, prefix)


async def test_a_session_survives_a_sigkill_of_the_only_daemon_on_sqlite(tmp_path: Path) -> None:
    """Two turns noted, the daemon SIGKILLed, started again on the same file: the third turn
    (with the end marker) completes the session, scored once with its three turns (idle_s is
    long here: the session must not go idle while the daemon restarts)."""
    backend = await CaptureBackend().start()
    http_port = free_port()
    config = _config(tmp_path, backend, f"sqlite:///{tmp_path / 'queue.db'}", "unused:", http_port, idle_s=120)
    serve = ServeProcess(config, tmp_path / "daemon.log", http_port)
    session_id = f"killed-{uuid.uuid4().hex[:8]}"
    try:
        await serve.start()
        for i in range(2):
            await _post(http_port, turn_body(session_id, i)[0])
        await wait_until(lambda: _answered(backend) == 2, timeout=30, what="the two turns' run scores")
        assert await serve.stop(signal.SIGKILL) == -signal.SIGKILL
        await serve.start()
        await _post(http_port, turn_body(session_id, 2, end=True)[0])
        await wait_until(lambda: len(_session_scores(backend, session_id)) == 1, timeout=30, what="the session's score")
        (score,) = _session_scores(backend, session_id)
        assert score.attributes["tracescore.session.turns"] == 3
        assert score.attributes["tracescore.session.revision"] == 1
    finally:
        await serve.kill()
        await backend.stop()


def _answered(backend: CaptureBackend) -> int:
    return sum(s.attributes.get("tracescore.scorer.id") == "answered" for s in backend.scores())


@pytest.fixture
async def sqlite_backend() -> AsyncIterator[CaptureBackend]:
    backend = await CaptureBackend().start()
    yield backend
    await backend.stop()


async def test_idle_s_counts_from_the_last_turns_arrival_not_after_decision_wait(
        tmp_path: Path, sqlite_backend: CaptureBackend) -> None:
    """With decision_wait 2 s and idle_s 3.5 s, a session is scored about 3.5 s after its last turn
    arrived; counting idle from the turn's decision, as before, scored it after 5.5 s."""
    http_port = free_port()
    config = _config(tmp_path, sqlite_backend, f"sqlite:///{tmp_path / 'queue.db'}", "unused:", http_port,
                     idle_s=3.5, decision_wait=2.0)
    serve = ServeProcess(config, tmp_path / "daemon.log", http_port)
    session_id = f"idle-{uuid.uuid4().hex[:8]}"
    try:
        await serve.start()
        for i in range(2):
            await _post(http_port, turn_body(session_id, i)[0])
        arrived = time.monotonic()  # the last turn is in: the receiver answered
        await wait_until(lambda: len(_session_scores(sqlite_backend, session_id)) == 1, timeout=30,
                         what="the idle session's score")
        waited = time.monotonic() - arrived
        assert 3.4 <= waited < 4.8, f"scored {waited:.2f} s after the last turn arrived"
        (score,) = _session_scores(sqlite_backend, session_id)
        assert score.attributes["tracescore.session.turns"] == 2
    finally:
        await serve.kill()


async def test_sessions_under_min_turns_are_counted_in_status_and_not_scored(
        tmp_path: Path, sqlite_backend: CaptureBackend) -> None:
    """``min_turns = 2``: a one-turn session (a single-run agent's conversation id) is closed
    unscored and counted as short in ``status``; a two-turn session is scored; every run is
    scored by the run scorer all the same."""
    http_port = free_port()
    config = _config(tmp_path, sqlite_backend, f"sqlite:///{tmp_path / 'queue.db'}", "unused:", http_port,
                     min_turns=2)
    serve = ServeProcess(config, tmp_path / "daemon.log", http_port)
    single, pair = f"single-{uuid.uuid4().hex[:8]}", f"pair-{uuid.uuid4().hex[:8]}"
    try:
        await serve.start()
        await _post(http_port, turn_body(single, 0, end=True)[0])
        await _post(http_port, turn_body(pair, 0)[0])
        await _post(http_port, turn_body(pair, 1, end=True)[0])
        await wait_until(lambda: len(_session_scores(sqlite_backend, pair)) == 1, timeout=30, what="the pair's score")
        url = f"http://127.0.0.1:{http_port}"

        async def status_sessions() -> dict[str, float]:
            code, out, err = await cli("status", url, "--once", "--format", "json")
            assert code == 0, err
            return dict(json.loads(out).get("sessions") or {})

        async def counted() -> bool:
            return (await status_sessions()).get("short") == 1
        await wait_until(counted, timeout=30, what="status to count the short session")
        assert (await status_sessions()).get("scored") == 1
        await wait_until(lambda: _answered(sqlite_backend) == 3, timeout=30, what="the three runs' scores")
        assert _session_scores(sqlite_backend, single) == []
        code, out, err = await cli("status", url, "--once")
        assert code == 0, err
        assert "sessions short (< min_turns)" in out
    finally:
        await serve.kill()
