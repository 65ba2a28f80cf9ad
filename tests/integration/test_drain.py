"""SIGTERM drains, on both stores: a judge call in flight finishes (``workers.drain_timeout_s``),
its score is kept and exported, and after a restart the judge is not called again for that
run. With a drain shorter than the call, the job is handed back and scored after the restart.

The judge's reply is held by the test (`llm_server.Reply.held`), not delayed by a fixed latency:
the call is in flight when the daemon logs the signal, however slow the machine, and the reply
comes when the test lets it (after the signal; or, for a short drain, after the daemon exited).
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import llm_server  # tests/support: the fake OpenAI-compatible server (the network boundary)
import pytest
from daemon_harness import (
    CaptureBackend,
    delete_redis_keys,
    emit_agent_trace,
    free_port,
    wait_until,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from serve_process import STOP_S, ServeProcess
from shared_redis import REDIS_URL

pytestmark = pytest.mark.long  # lasts tens of seconds by design: scheduled first (see conftest.py)

HOLD_S = 1.0  # how long the judge's reply is held after the daemon logged the signal

JUDGED = '''import os

# litellm is imported with the scorers, as the daemon starts (its import takes seconds of CPU,
# tens on a loaded machine), not on the first judge call, whose wait below would include it.
import litellm  # noqa: F401

from scorers import Judge, create_scorer

judge = Judge(model="openai/gpt-4o-mini", instructions="You are a strict evaluator.",
              model_settings={"api_base": os.environ["TEST_LLM_API_BASE"], "api_key": "test-key"})
judged = create_scorer(id="judged", description="judged", type="agent", judge=judge, version="1").generate_score(
    description="Rate the answer", create_prompt=lambda run: "Answer: " + run.output[-1].content)
two_step = (
    create_scorer(id="two-step", description="two judge steps", type="agent", judge=judge, version="1")
    .analyze(description="Check the answer", output_schema={"type": "object", "properties": {"score": {"type": "number"}}},
             create_prompt=lambda run: "Check: " + run.output[-1].content)
    .generate_score(description="Rate the answer", create_prompt=lambda run: "Rate: " + run.output[-1].content)
)
'''


@pytest.fixture(params=["sqlite", "redis"])
async def setup(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    llm = await llm_server.LLMTestServer(default=llm_server.Reply.json({"score": 0.9})).start()
    gate = asyncio.Event()  # releases the replies a test holds
    backend = await CaptureBackend().start()
    prefix = f"test-{uuid.uuid4().hex[:12]}:"
    url = f"sqlite:///{tmp_path / 'queue.db'}" if request.param == "sqlite" else REDIS_URL
    (tmp_path / "judged_scorers.py").write_text(JUDGED)
    http_port = free_port()

    def daemon(drain_timeout_s: float, scorer: str = "judged") -> ServeProcess:
        config = tmp_path / f"drain-{drain_timeout_s:g}.toml"
        config.write_text(
            f'[receiver]\ngrpc_endpoint = ""\nhttp_endpoint = "127.0.0.1:{http_port}"\n'
            f'[assembly]\ndecision_wait = 0.2\n'
            f'[queue]\nurl = "{url}"\nkey_prefix = "{prefix}"\n'
            f'[workers]\ndrain_timeout_s = {drain_timeout_s}\n'
            f'[export]\nendpoint = "{backend.endpoint}"\nforward_spans = false\ntimeout_s = 2.0\n'
            f'[[scorers]]\nref = "{tmp_path / "judged_scorers.py"}:{scorer}"\n'
        )
        return ServeProcess(config, tmp_path / "daemon.log", http_port, env={"TEST_LLM_API_BASE": llm.url + "/v1"})

    made: list[ServeProcess] = []

    def make(drain_timeout_s: float, scorer: str = "judged") -> ServeProcess:
        made.append(daemon(drain_timeout_s, scorer))
        return made[-1]

    yield {"llm": llm, "backend": backend, "daemon": make, "http_port": http_port, "gate": gate}
    gate.set()  # a held reply would keep the server's stop waiting for it
    for d in made:
        await d.kill()
    await backend.stop()
    await llm.stop()
    if request.param == "redis":
        await delete_redis_keys(REDIS_URL, prefix)


def calls_for(llm: Any, answer: str) -> int:
    return sum(answer in r.message_text("user") for r in llm.requests)


async def send(port: int, answer: str) -> None:
    exporter = HttpExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout=30)
    await asyncio.to_thread(emit_agent_trace, exporter, answer=answer)


async def queue_empty(port: int) -> bool:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}/status") as resp:
            (own, *_) = (await resp.json())["replicas"]
    return own["queue"]["queued"] == 0 and own["queue"]["in_flight"] == 0


def drain_seconds(log: str) -> float:
    """How long the daemon's last drain took, from its own log (signal received -> stopped):
    the process's exit after that (interpreter teardown) is not the drain's."""
    stamps = {}
    for line in log.splitlines():
        for event in ("signal received: draining", "tracescore stopped"):
            if line.endswith(event) or f"{event} (" in line:
                stamps[event] = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    return (stamps["tracescore stopped"] - stamps["signal received: draining"]).total_seconds()


async def signal_draining(daemon: ServeProcess) -> None:
    """SIGTERM the (running) daemon and wait until it logged the signal: it is draining."""
    assert daemon.proc is not None
    start = len(await asyncio.to_thread(daemon.log.read_bytes))  # what this signal makes it log comes after
    daemon.proc.send_signal(signal.SIGTERM)

    async def logged() -> bool:
        return b"signal received: draining" in (await asyncio.to_thread(daemon.log.read_bytes))[start:]

    await wait_until(logged, timeout=30, what="the daemon logging the signal")


async def exited(daemon: ServeProcess) -> int:
    """The signalled daemon's exit code (bounded: it drains first)."""
    assert daemon.proc is not None
    code = await asyncio.wait_for(daemon.proc.wait(), STOP_S)
    daemon.proc = None
    return code


async def sigterm_during_the_judge_call(daemon: ServeProcess, llm: Any, gate: asyncio.Event, port: int,
                                        answer: str, release_after_exit: bool) -> float:
    """Start the daemon, send a run whose judge reply is held, SIGTERM the daemon while the call
    is in flight; release the reply `HOLD_S` after the daemon logged the signal, or only once it
    exited (``release_after_exit``: a drain that must not wait for the call). How long it drained."""
    llm.script(llm_server.Reply.json({"score": 0.9}).held(gate))
    await daemon.start()
    await send(port, answer)
    await wait_until(lambda: calls_for(llm, answer) == 1, timeout=60, what="the judge call in flight")
    await signal_draining(daemon)
    if release_after_exit:
        assert await exited(daemon) == 0  # while the judge had not answered: it did not wait
        gate.set()
    else:
        await asyncio.sleep(HOLD_S)  # the call stays in flight this long into the drain
        gate.set()
        assert await exited(daemon) == 0
    return drain_seconds(await asyncio.to_thread(daemon.log.read_text))


async def test_sigterm_lets_the_judge_call_finish_and_never_pays_it_twice(setup: dict[str, Any]) -> None:
    llm, backend, port, gate = setup["llm"], setup["backend"], setup["http_port"], setup["gate"]
    waited = await sigterm_during_the_judge_call(setup["daemon"](30.0), llm, gate, port, "First answer.",
                                                 release_after_exit=False)
    # The reply came HOLD_S after the signal was logged: the drain waited for the call (the log's
    # stamps are to the millisecond).
    assert waited >= HOLD_S - 0.01
    assert [s.attributes["gen_ai.evaluation.score.value"] for s in backend.scores()] == [0.9]  # flushed

    second = setup["daemon"](30.0)
    await second.start()
    await wait_until(lambda: queue_empty(port), what="an empty queue after the restart")
    await send(port, "Second answer.")  # the worker runs: a job left over would have run first
    await wait_until(lambda: len(backend.scores()) == 2, timeout=60, what="the second score")
    assert (calls_for(llm, "First answer."), calls_for(llm, "Second answer.")) == (1, 1)
    assert await second.stop() == 0


async def test_a_drain_shorter_than_the_call_hands_the_job_back(setup: dict[str, Any]) -> None:
    llm, backend, port, gate = setup["llm"], setup["backend"], setup["http_port"], setup["gate"]
    # The daemon exits while the judge's reply is still held: it did not wait for the call.
    await sigterm_during_the_judge_call(setup["daemon"](0.2), llm, gate, port, "Handed back.",
                                        release_after_exit=True)
    assert backend.scores() == []
    second = setup["daemon"](30.0)
    await second.start()
    await wait_until(lambda: len(backend.scores()) == 1, timeout=60, what="the handed-back job's score")
    assert calls_for(llm, "Handed back.") == 2  # the unfinished call is made again, once
    assert await second.stop() == 0


async def test_a_handed_back_job_never_pays_again_for_a_judge_call_that_finished(
    setup: dict[str, Any],
) -> None:
    """Two judge steps; SIGTERM during the second with a drain shorter than the call: the job is
    handed back, and after the restart only the unfinished call reaches the judge again (the
    first step's reply was kept in the store with the job)."""
    llm, backend, port, gate = setup["llm"], setup["backend"], setup["http_port"], setup["gate"]

    def hold_the_second_step(body: Any) -> llm_server.Reply | None:  # the first step is answered at once
        if "Rate: " in llm_server.RecordedRequest("", {}, body).message_text("user"):
            return llm_server.Reply.json({"score": 0.9}).held(gate)
        return None

    llm.responder = hold_the_second_step
    daemon = setup["daemon"](0.2, "two_step")
    await daemon.start()
    await send(port, "Kept answer.")
    await wait_until(lambda: calls_for(llm, "Rate: Kept answer.") == 1, timeout=60,
                     what="the second judge call in flight")
    await signal_draining(daemon)
    assert await exited(daemon) == 0  # with the second step's reply still held
    gate.set()  # from now on the judge answers the second step at once
    assert backend.scores() == [] and calls_for(llm, "Check: Kept answer.") == 1
    second = setup["daemon"](30.0, "two_step")
    await second.start()
    await wait_until(lambda: len(backend.scores()) == 1, timeout=60, what="the handed-back job's score")
    assert calls_for(llm, "Check: Kept answer.") == 1  # finished before the drain: never asked again
    assert calls_for(llm, "Rate: Kept answer.") == 2  # cut off by the drain: asked again, once
    assert await second.stop() == 0
