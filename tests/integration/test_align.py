"""``tracescore align`` (SPEC §11, issue 39) against a scripted OpenAI-compatible server on loopback.

The deployment is a SQLite store holding people's labels on 30 saved agent runs (OTLP files
made with the SDK, fixed trace ids so that the train/holdout split is the same every time):
a polite answer passes, a rude one fails. The judge agrees with them only when its system
message holds `MARKER`; otherwise it passes everything (kappa 0). The proposer's replies are
scripted per candidate: JSON, empty, a refusal, and instructions that hold the marker.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import textwrap
import threading
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from conversation_traces import emit_turn
from daemon_harness import agent_trace_body
from langfuse_server import LangfuseServer
from llm_server import LLMTestServer, Reply
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from collector.cli import main
from collector.commands.align.propose import PROPOSER_INSTRUCTIONS
from collector.commands.align.report import toml_text, write_instructions
from collector.commands.label_store import open_label_store_made
from collector.common.labels import Label
from collector.config import load_config
from collector.work.registry import sampled

MARKER = "Politeness decides"
RUNS = 30
PRICES = {"gpt-4o-mini": (1.5e-7, 6e-7), "gpt-4o": (2.5e-6, 1e-5)}  # litellm's bundled map, USD per token
GOOD = f"{MARKER}: a polite answer passes and a rude one fails, whatever else it says."
SCORERS = textwrap.dedent(
    """
    from scorers import Judge, create_scorer
    from scorers.utils import get_assistant_message

    JUDGE = Judge(model="openai/gpt-4o-mini", instructions="Judge the answer.",
                  model_settings={"api_base": API_BASE, "api_key": "k"})
    tone = (create_scorer(id="tone", name="Tone", description="Whether the answer is polite", judge=JUDGE)
            .generate_score(description="Score the answer",
                            create_prompt=lambda run: f"Answer: {get_assistant_message(run.output)}"))
    two = (create_scorer(id="two", description="Two judges", judge=JUDGE)
           .analyze(description="Tone words", output_schema={"type": "object"}, create_prompt=lambda run: "Words?",
                    judge=Judge(instructions="List the tone words."))
           .generate_score(description="Score", create_prompt=lambda run: "Score it."))
    code = create_scorer(id="code", description="No judge").generate_score(lambda run: 1.0)
    convo = (create_scorer(id="convo", name="Convo", type="conversation", description="Whether the chat went well",
                           judge=JUDGE)
             .generate_score(description="Score the chat", create_prompt=lambda run: f"Turns: {len(run.turns)}"))
    """
)


def fixed_trace_id(body: bytes, seed: str) -> tuple[bytes, str]:
    """An OTLP request with every span's trace id set to one derived from ``seed`` (the split is by
    trace id: fixed ids, the same split every run); the request and the trace id as hex."""
    request = ExportTraceServiceRequest.FromString(body)
    trace_id = hashlib.sha256(seed.encode()).digest()[:16]
    for resource in request.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                span.trace_id = trace_id
    return request.SerializeToString(), trace_id.hex()


def one_side(chat: int) -> tuple[str, str]:
    """Trace id seeds of a chat's two turns whose ids split to the same side at ``--holdout 0.5``:
    a session is split by its first turn's trace id, and Langfuse's times (milliseconds) may not
    tell which of two turns sent within one is first."""
    for k in range(100):  # bounded: about one in two pairs will do
        seeds = (f"{chat}-{k}-0", f"{chat}-{k}-1")
        if len({sampled(fixed_trace_id(b"", seed)[1], 0.5) for seed in seeds}) == 1:
            return seeds
    raise AssertionError("no pair of seeds on one side")


def polite(n: int) -> bool:
    """Which runs people label polite (pass)."""
    return n % 3 == 0


class Scripted:
    """The server's answers: the proposer's by candidate number, the judge's by its system message."""

    def __init__(self) -> None:
        self.candidates: dict[int, Reply] = {}

    def __call__(self, body: Any) -> Reply:
        system = next(m["content"] for m in body["messages"] if m["role"] == "system")
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        if system.startswith(PROPOSER_INSTRUCTIONS):
            return self.candidates[int(re.search(r"Write candidate (\d+) of", user).group(1))]
        agrees = MARKER in system.split("\n\nExamples judged by people", 1)[0]  # the instructions, not the examples
        return Reply.json({"score": (1.0 if "Thank you" in user else 0.0) if agrees else 1.0})


@pytest.fixture
async def deployment(tmp_path: Path) -> AsyncIterator[tuple[LLMTestServer, Scripted, Path, Path]]:
    """The judge server, its script, the config file and the folder of the 30 labelled runs."""
    from scorers._judge_transport import aclose_judge_clients

    server = await LLMTestServer().start()
    scripted = Scripted()
    server.responder = scripted
    (tmp_path / "align_scorers.py").write_text(f"API_BASE = {server.url + '/v1'!r}\n" + SCORERS)
    config = tmp_path / "ts.toml"
    config.write_text(f'[queue]\nurl = "sqlite:///{tmp_path / "queue.db"}"\n' + "".join(
        f'[[scorers]]\nref = "{tmp_path / "align_scorers.py"}:{name}"\n' for name in ("tone", "two", "code")))
    runs = tmp_path / "runs"
    runs.mkdir()
    labels = []
    for n in range(RUNS):
        answer = f"Thank you kindly, here is your refund {n}." if polite(n) else f"Go away, no refund {n}."
        body, _, span_id = agent_trace_body(answer)
        body, trace_id = fixed_trace_id(body, f"align-run-{n}")
        (runs / f"run{n:02d}.pb").write_bytes(body)
        labels.append(Label("Tone", trace_id, span_id, None, polite(n), "file", annotator="ana",
                            rationale="polite to the customer" if polite(n) else "rude to the customer",
                            at=1_000.0 + n, source_id=f"labels.jsonl:{n + 1}"))
    store = await open_label_store_made(await asyncio.to_thread(load_config, str(config)))
    try:
        assert await store.put_labels(labels) == RUNS
    finally:
        await store.close()
    try:
        yield server, scripted, config, runs
    finally:
        await aclose_judge_clients()
        await server.stop()


async def align(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``tracescore align`` in a thread (its own event loop; the server answers on this one)."""
    code = await asyncio.wait_for(asyncio.to_thread(main, ["align", *args]), 120)  # a failure detector
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def spend_of(requests: list[Any]) -> float:
    """What the requests cost at their models' prices, from the usage the server billed."""
    return sum(r.usage["prompt_tokens"] * PRICES[r.body["model"]][0]
               + r.usage["completion_tokens"] * PRICES[r.body["model"]][1] for r in requests)


async def test_align_adopts_the_candidate_that_agrees_on_the_holdout_and_reports_the_others(
        deployment: tuple[LLMTestServer, Scripted, Path, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    server, scripted, config, runs = deployment
    base = ["tone", str(runs), "--proposer", "openai/gpt-4o", "--config", str(config), "--json"]

    code, out, err = await align(capsys, *base, "--min-labels", "31")  # too few: before any call
    assert code == 2 and server.request_count == 0
    assert "30 labelled item(s) (labels: file 30) among the 30 run(s) read" in err and "--min-labels 31" in err

    code, out, err = await align(capsys, *base, "--estimate")  # what it would cost: nothing sent
    assert code == 0 and server.request_count == 0, err
    estimate = json.loads(out)
    assert (estimate["labels"], estimate["train_n"], estimate["holdout_n"]) == (30, 22, 8)
    calls = {row["phase"]: row["judge_calls"] for row in estimate["estimate"]}
    assert calls == {"current judge": 30, "proposer": 4, "candidates": 32, "candidates with few-shot": 32}
    assert estimate["calls"] == 98 and estimate["usd"] > 0

    code, out, err = await align(capsys, *base, "--max-usd", "0.0001")  # one call's worst case passes it
    assert code == 1 and server.request_count == 0 and "--max-usd reached" in err and "nothing written" in err

    scripted.candidates = {1: Reply.json({"instructions": GOOD}), 2: Reply.text(""),
                           3: Reply.text("I'm sorry, but I can't help with rewriting these instructions."),
                           4: Reply.text(GOOD)}
    out_dir = tmp_path / "aligned"
    code, out, err = await align(capsys, *base, "--out", str(out_dir))
    assert code == 0, err
    report = json.loads(out)
    assert (report["scorer"], report["labels"], report["holdout_n"], report["disagreements"]) == ("tone", 30, 8, 16)
    assert report["current"]["kappa"] == 0.0 and report["current"]["accuracy"] == 0.5
    failed = {c["candidate"]: c["error"] for c in report["candidates"] if c["error"]}
    assert failed == {1: "not usable instructions: a JSON reply, not instructions",
                      2: "not usable instructions: empty reply", 3: "not usable instructions: a refusal"}
    measured = [c for c in report["candidates"] if not c["error"]]
    assert [(c["candidate"], c["few_shot"], c["kappa"], c["accuracy"]) for c in measured] == [
        (4, 0, 1.0, 1.0), (4, 3, 1.0, 1.0)]
    assert measured[0]["instructions"] == GOOD and measured[0]["kappa_ci"] == [1.0, 1.0]
    assert report["best"] == {"candidate": 4, "few_shot": 0} and report["adopted"] is True
    assert report["out"] == str(out_dir / "tone.toml")
    assert tomllib.loads((out_dir / "tone.toml").read_text())["instructions"] == GOOD
    assert report["calls"] == server.request_count == 30 + 4 + 8 + 8
    assert report["usd"] == pytest.approx(spend_of(server.requests), rel=1e-6)

    proposer = [r for r in server.requests if r.body["model"] == "gpt-4o"]
    assert len(proposer) == 4 and all("Disagreement 16\n" in r.message_text("user") and "rude to the customer"
                                      in r.message_text("user") and "Judge the answer." in r.message_text("user")
                                      for r in proposer)
    shown = [r.message_text("system") for r in server.requests if "<example n=" in r.message_text("system")]
    assert len(shown) == 8 and len(set(shown)) == 1  # the holdout, with the same three examples
    instructions, examples = shown[0].split("\n\n", 1)
    assert instructions == GOOD and examples.count("<example n=") == 3
    assert re.findall(r"<verdict>(\w+)</verdict>", examples) == ["pass", "fail", "pass"]  # balanced, newest first
    held = {int(n) for r in server.requests if r.body["model"] == "gpt-4o-mini" and MARKER in r.message_text("system")
            for n in re.findall(r"refund (\d+)", r.message_text("user"))}
    assert held == {3, 6, 9, 13, 17, 23, 27, 29}  # the holdout: split by trace id
    assert not held & {int(n) for n in re.findall(r"refund (\d+)", examples)}  # no example is measured on

    scripted.candidates = {n: Reply.text(f"Judge the tone of answer {n} with care, case by case.") for n in (1, 2)}
    server.reset_stats()
    code, out, err = await align(capsys, *base, "--candidates", "2", "--out", str(tmp_path / "none"))
    report = json.loads(out)
    assert code == 0 and report["adopted"] is False and report["out"] is None
    assert [c["kappa"] for c in report["candidates"]] == [0.0, 0.0, 0.0, 0.0]  # none beats the current 0.0
    assert not (tmp_path / "none").exists() and report["calls"] == server.request_count == 30 + 2 + 4 * 8

    code, out, err = await align(capsys, *base[:-1], "--candidates", "1", "--out", str(tmp_path / "none"))
    assert code == 0 and "current" in out and "candidate 1" in out and "nothing written" in out  # the table


async def daemon_scores(config: Path, bodies: list[bytes]) -> set[str]:
    """An in-process daemon of ``config`` scores ``bodies`` (posted over OTLP/HTTP) and stops once
    their scores are kept; returns the judge revisions its kept scores carry."""
    from collector.service import Service
    from collector.work.registry import ScorerRegistry

    loaded = await asyncio.to_thread(load_config, str(config))
    service = Service(loaded, await asyncio.to_thread(ScorerRegistry.load, loaded.scorers))
    await service.start()
    try:
        assert service.http is not None
        kept_before = await service.store.kept_score_count()
        async with aiohttp.ClientSession() as session:
            for body in bodies:
                async with session.post(f"http://127.0.0.1:{service.http.port}/v1/traces", data=body,
                                        headers={"Content-Type": "application/x-protobuf"}) as reply:
                    assert reply.status == 200
        for _ in range(600):  # bounded: 60 s
            if await service.store.kept_score_count() >= kept_before + len(bodies):
                break
            await asyncio.sleep(0.1)
        return {k.revision async for batch in service.store.scan_kept_scores() for k in batch}
    finally:
        await service.shutdown()


async def test_the_daemon_scores_under_the_adopted_instructions_and_agreement_shows_both_revisions(
        deployment: tuple[LLMTestServer, Scripted, Path, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    _, _, config, runs = deployment
    daemon = tmp_path / "daemon.toml"
    head = (f'[receiver]\ngrpc_endpoint = ""\nhttp_endpoint = "127.0.0.1:0"\n[assembly]\ndecision_wait = 0.2\n'
            f'[queue]\nurl = "sqlite:///{tmp_path / "queue.db"}"\n[[scorers]]\nref = "{tmp_path / "align_scorers.py"}:tone"\n')
    daemon.write_text(head)
    files = sorted(runs.glob("*.pb"))
    old = await daemon_scores(daemon, [f.read_bytes() for f in files[:12]])  # the judge as it was
    await asyncio.to_thread(write_instructions, tmp_path / "aligned" / "tone.toml",
                            toml_text(GOOD, "written by tracescore align"))
    daemon.write_text(head + f'instructions_file = "{tmp_path / "aligned" / "tone.toml"}"\n')  # adopted: a restart
    both = await daemon_scores(daemon, [f.read_bytes() for f in files[12:24]])
    (new,) = both - old
    assert len(old) == 1 and len(both) == 2

    code = await asyncio.to_thread(main, ["agreement", "--json", "--config", str(daemon)])
    rows = {row["revision"]: row for row in map(json.loads, capsys.readouterr().out.splitlines())}
    assert code == 0 and set(rows) == both  # side by side: one series per revision
    (before,) = old
    assert (rows[before]["n"], rows[before]["kappa"], rows[before]["accuracy"]) == (12, 0.0, round(4 / 12, 4))
    assert (rows[new]["n"], rows[new]["kappa"], rows[new]["accuracy"]) == (12, 1.0, 1.0)


async def test_a_scorer_without_one_judge_is_refused_and_a_failing_provider_stops_the_align(deployment: tuple[LLMTestServer, Scripted, Path, Path],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    server, _, config, runs = deployment
    code, _, err = await align(capsys, "two", str(runs), "--proposer", "openai/gpt-4o", "--config", str(config))
    assert code == 2 and "scorer 'two' has several judges" in err
    assert "analyze: openai/gpt-4o-mini 'List the tone words.'" in err and "generate_score:" in err
    code, _, err = await align(capsys, "code", str(runs), "--proposer", "openai/gpt-4o", "--config", str(config))
    assert code == 2 and "scorer 'code' has no judge" in err
    code, _, err = await align(capsys, "nope", str(runs), "--proposer", "openai/gpt-4o", "--config", str(config))
    assert code == 2 and "no scorer 'nope' in the configuration (configured: tone, two, code)" in err
    assert server.request_count == 0

    server.responder = lambda body: Reply.error(500)  # the provider fails mid-way: exit 1, nothing written
    code, out, err = await align(capsys, "tone", str(runs), "--proposer", "openai/gpt-4o", "--config", str(config),
                                 "--out", str(config.parent / "aligned"))
    assert code == 1 and out == "" and not (config.parent / "aligned").exists()
    assert "tracescore: align tone stopped: the judge failed on trace" in err and "nothing written" in err
    assert f"; {server.request_count} call(s)" in err and server.request_count > 0


async def test_a_conversation_scorer_is_aligned_on_the_sessions_read_from_langfuse(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--from langfuse+URL``: the turns are read back from the backend's API and made into
    sessions; each labelled session is one item, split by its first turn's trace id."""
    from scorers._judge_transport import aclose_judge_clients

    langfuse, server = await LangfuseServer().start(), await LLMTestServer().start()
    server.responder = lambda body: Reply.text(GOOD) if body["model"] == "gpt-4o" else Reply.json({"score": 1.0})
    try:
        auth = aiohttp.BasicAuth(langfuse.public_key, langfuse.secret_key)
        held = set()
        async with aiohttp.ClientSession(auth=auth) as http:
            for chat in range(8):
                seeds = one_side(chat)
                if sampled(fixed_trace_id(b"", seeds[0])[1], 0.5):
                    held.add(chat)
                for turn, seed in enumerate(seeds):
                    memory = InMemorySpanExporter()
                    emit_turn(memory, f"chat-{chat}", turn)
                    body, _ = fixed_trace_id(encode_spans(memory.get_finished_spans()).SerializeToString(), seed)
                    async with http.post(f"{langfuse.url}/api/public/otel/v1/traces", data=body,
                                         headers={"Content-Type": "application/x-protobuf"}) as reply:
                        assert reply.status == 200, await reply.text()
        (tmp_path / "align_scorers.py").write_text(f"API_BASE = {server.url + '/v1'!r}\n" + SCORERS)
        config = tmp_path / "ts.toml"
        config.write_text(f'[queue]\nurl = "sqlite:///{tmp_path / "queue.db"}"\n'
                          f'[sinks.langfuse]\nhost = "{langfuse.url}"\npublic_key = "{langfuse.public_key}"\n'
                          f'secret_key = "{langfuse.secret_key}"\n'
                          f'[[scorers]]\nref = "{tmp_path / "align_scorers.py"}:convo"\n')
        store = await open_label_store_made(await asyncio.to_thread(load_config, str(config)))
        try:
            await store.put_labels([Label("Convo", "", None, f"chat-{chat}", chat % 2 == 0, "langfuse", annotator="ana")
                                    for chat in range(8)])
        finally:
            await store.close()
        code, out, err = await align(capsys, "convo", "--from", f"langfuse+{langfuse.url}", "--since", "1h",
                                     "--proposer", "openai/gpt-4o", "--candidates", "1", "--holdout", "0.5",
                                     "--min-labels", "8", "--config", str(config), "--json", "--out", str(tmp_path))
    finally:
        await aclose_judge_clients()
        await server.stop()
        await langfuse.stop()
    assert code == 0, err
    report = json.loads(out)
    assert 0 < len(held) < 8 and (report["labels"], report["holdout_n"]) == (8, len(held))
    passing = sum(chat % 2 == 0 for chat in held) / len(held)  # the judge passes all
    assert report["current"]["accuracy"] == round(passing, 4) and report["adopted"] is False
    judged = [r.message_text("user") for r in server.requests if r.body["model"] == "gpt-4o-mini"]
    assert len(judged) == 8 + 2 * len(held) and set(judged) == {"Turns: 2"}  # every session of its two turns
    assert report["calls"] == len(server.requests) == 8 + 1 + 2 * len(held)


def test_the_instructions_file_is_whole_or_absent_whatever_reads_it_meanwhile(tmp_path: Path) -> None:
    """A reader polling the file while it is rewritten sees the old or the new instructions, never
    part of them; a write that fails (the target is a folder) leaves no temporary file behind."""
    path = tmp_path / "tone.toml"
    versions = [toml_text(f"Version {v}: " + "judge politely " * 50_000) for v in range(4)]
    seen: list[str] = []
    done = threading.Event()

    def read() -> None:
        for _ in range(100_000):  # bounded; ends when the writer is done
            if done.is_set():
                return
            try:
                seen.append(tomllib.loads(path.read_text())["instructions"][:10])
            except FileNotFoundError:
                seen.append("absent")
            except (tomllib.TOMLDecodeError, KeyError):
                seen.append("partial")

    reader = threading.Thread(target=read)
    reader.start()
    for text in versions:
        write_instructions(path, text)
    done.set()
    reader.join(60)
    assert not reader.is_alive() and set(seen) <= {"absent", *(f"Version {v}:" for v in range(4))}
    assert tomllib.loads(path.read_text())["instructions"].startswith("Version 3:")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tone.toml"]
    (tmp_path / "folder.toml").mkdir()
    (tmp_path / "folder.toml" / "keep").write_text("x")
    with pytest.raises(OSError):
        write_instructions(tmp_path / "folder.toml", versions[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder.toml", "tone.toml"]
