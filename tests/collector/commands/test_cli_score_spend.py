"""`tracescore score --estimate` and `--max-usd` (SPEC §8, issue 21 point 5) on saved OTLP runs,
against the loopback judge server billing realistic usage (litellm's tokenizer, as a provider).

The server answers as a model would (`answer_like_a_model`): statements taken from the prompt's
text, one verdict with a short reason per statement, a one-sentence reason: not the estimate's
made-up replies, so the estimate is compared with a spend it did not produce.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import textwrap
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from llm_server import LLMTestServer, Reply
from repo_paths import FIXTURES

from collector.cli import main

RUN_FILES = sorted(str(p) for p in FIXTURES.glob("*/S*.pb"))
"""Every saved run of the fixtures (ten runs, one conversation with two turns)."""

INPUT_PRICE, OUTPUT_PRICE = 1.5e-7, 6e-7  # gpt-4o-mini in litellm's bundled price map, USD per token

SCORERS = textwrap.dedent(
    """
    from scorers import Judge, create_scorer
    from scorers.builtin import answer_relevancy, conversation_completeness
    from scorers.utils import get_assistant_message

    SETTINGS = {"api_base": API_BASE, "api_key": "k"}
    relevancy = answer_relevancy({"model": "openai/gpt-4o-mini", "model_settings": SETTINGS})
    completeness = conversation_completeness({"model": "openai/gpt-4o-mini", "model_settings": SETTINGS})

    CLAIMS = {"type": "object", "properties": {"claims": {"type": "array", "items": {"type": "string"}}},
              "required": ["claims"], "additionalProperties": False}
    CHECK = {"type": "object", "properties": {"claim": {"type": "string"}, "supported": {"type": "boolean"},
             "confidence": {"type": "integer", "minimum": 1, "maximum": 5}},
             "required": ["claim", "supported", "confidence"], "additionalProperties": False}
    CHECKS = {"type": "object", "properties": {"checks": {"type": "array", "items": CHECK}},
              "required": ["checks"], "additionalProperties": False}

    def _claims(run, results):
        lines = "\\n".join(f"- {claim}" for claim in results.preprocess_step_result["claims"])
        return ("Check each claim against what a careful assistant could know: is it supported, "
                "and how confident are you (1-5)? Return one check per claim, in order.\\n\\n"
                f"Question: {run.input.input_messages[-1].content if run.input.input_messages else ''}\\n\\n"
                f"Claims:\\n{lines}")

    def _score(results):
        checks = results.analyze_step_result["checks"]
        return sum(c["supported"] for c in checks) / len(checks) if checks else 0.0

    grounded = (
        create_scorer(id="grounded", description="Share of the answer's claims the judge supports", type="agent",
                      judge=Judge(model=MODEL, instructions="You check the factual claims of an assistant's "
                                  "answers, one by one, and explain your verdicts briefly.",
                                  model_settings=SETTINGS))
        .preprocess(description="Extract the claims", output_schema=CLAIMS, create_prompt=lambda run: (
            "List the factual claims this answer makes, each as a short self-contained sentence.\\n\\n"
            f"Answer:\\n{get_assistant_message(run.output)}"))
        .analyze(description="Check each claim", output_schema=CHECKS, create_prompt=_claims)
        .generate_score(_score)
        .generate_reason(description="Explain the score", create_prompt=lambda run, results, score: (
            f"Explain in one or two sentences why the answer's grounding score is {score}.\\n\\n"
            f"Score: {score}\\nChecks: {results.analyze_step_result['checks']}"))
    )
    """
)


def _sentences(text: str) -> list[str]:
    """The sentences of a prompt's last block (its header line and list numbers dropped), up to three."""
    block = text.rsplit("\n\n", 1)[-1].split("\n", 1)[-1]
    block = re.sub(r"^\s*(\d+\.|-)\s*", "", block, flags=re.M)
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", block) if s.strip()][:3]


def _subjects(text: str) -> list[str]:
    """What a verdict prompt asks a verdict for: its JSON list of statements, its numbered requests
    or its bulleted claims."""
    listed = re.search(r"Statements:\n(\[.*\])", text)
    if listed:
        return [str(s) for s in json.loads(listed.group(1))]
    block = re.search(r"(?:Requests|Claims):\n((?:(?:\d+\.|-) .*\n?)+)", text)
    return re.findall(r"^(?:\d+\.|-) (.*)$", block.group(1), re.M) if block else []


def answer_like_a_model(body: Any) -> Reply:
    """A judge's plausible answer to a request (the schema it was given decides the shape)."""
    user = next((m["content"] for m in reversed(body["messages"]) if m["role"] == "user"), "")
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema") or {}
    injected = re.search(r"(?:JSON schema:|matching this schema:)\n+(\{.*\})\n", "\n".join(
        m["content"] for m in body["messages"]))  # a model without native structured output
    if injected:
        schema = json.loads(injected.group(1))
        user = user.split("\n\nReturn your response as JSON", 1)[0]
    fields = set(schema.get("properties") or ())
    if not fields:  # a reason
        score = re.search(r"Score: ([0-9.]+)", user)
        return Reply.text(f"The score is {score.group(1) if score else 1} because the answer addresses the user's "
                          "question directly and completely: each of its statements is relevant to what was asked, "
                          "and none is off topic or unsupported.")
    if fields == {"statements"} or fields == {"claims"}:
        return Reply.json({fields.pop(): _sentences(user)})
    if fields == {"verdicts"}:
        return Reply.json({"verdicts": [{"verdict": "yes", "reason": f"The statement directly answers the user's question: {s!r}"}
                                        for s in _subjects(user)]})
    if fields == {"checks"}:
        return Reply.json({"checks": [{"claim": c, "supported": True, "confidence": 4} for c in _subjects(user)]})
    return Reply.json({"score": 0.8})


@pytest.fixture
async def judge() -> AsyncIterator[LLMTestServer]:
    """The loopback judge, billing realistic usage and answering like a model."""
    server = await LLMTestServer(realistic_usage=True).start()
    server.responder = answer_like_a_model
    try:
        yield server
    finally:
        await server.stop()


def scorer_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: LLMTestServer,
                  model: str = "openai/gpt-4o-mini") -> str:
    """A module of the three scorers, judged by ``server``; returns its name."""
    name = f"spend_scorers_{os.getpid()}_{tmp_path.name}".replace("-", "_")
    (tmp_path / f"{name}.py").write_text(f"API_BASE = {server.url + '/v1'!r}\nMODEL = {model!r}\n" + SCORERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


async def score(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``tracescore score`` in a thread (its own event loop; the server answers on this one)."""
    code = await asyncio.wait_for(asyncio.to_thread(main, ["score", *args]), 240)  # a failure detector
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def refs(module: str, *names: str) -> list[str]:
    """``--scorer module:name`` for each name."""
    return [arg for name in names for arg in ("--scorer", f"{module}:{name}")]


def rows(text: str) -> list[dict[str, Any]]:
    """The JSON rows of a stdout."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def spend_of(requests: Sequence[Any]) -> float:
    """What ``requests`` cost at gpt-4o-mini's prices, from the usage the server billed."""
    return sum(r.usage["prompt_tokens"] * INPUT_PRICE + r.usage["completion_tokens"] * OUTPUT_PRICE
               for r in requests)


INSTRUCTIONS = {"answer-relevancy": "answer relevancy evaluator", "conversation-completeness": "conversations",
                "grounded": "factual claims"}


def scorer_of(request: Any) -> str:
    """Which scorer sent a request (by its judge instructions)."""
    system = request.message_text("system")
    return next(scorer for scorer, words in INSTRUCTIONS.items() if words in system)


async def test_estimate_sends_nothing_and_is_within_ten_percent_of_the_real_spend(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        judge: LLMTestServer) -> None:
    module = scorer_module(tmp_path, monkeypatch, judge)
    names = refs(module, "relevancy", "completeness", "grounded")
    code, out, err = await score(capsys, *RUN_FILES, *names, "--estimate", "--format", "jsonl")
    assert code == 0, err
    assert judge.request_count == 0 and judge.prompt_tokens == 0  # nothing was sent
    estimate = {row["scorer"]: row for row in rows(out)}
    assert list(estimate) == ["answer-relevancy", "conversation-completeness", "grounded"]

    code, out, err = await score(capsys, *RUN_FILES, *names, "--format", "jsonl")
    assert code == 0, err
    assert all(row["error"] is None for row in rows(out))
    for scorer, row in estimate.items():
        mine = [r for r in judge.requests if scorer_of(r) == scorer]
        real = spend_of(mine)
        assert row["judge_calls"] == len(mine) > 0, scorer  # the same calls: every step ran
        assert row["prompt_tokens"] == pytest.approx(sum(r.usage["prompt_tokens"] for r in mine), rel=0.10)
        assert row["usd"] == pytest.approx(real, rel=0.10), (scorer, row, real)
        worst = sum(r.usage["prompt_tokens"] * INPUT_PRICE + 1024 * OUTPUT_PRICE for r in mine)
        assert row["worst_case_usd"] == pytest.approx(worst, rel=0.10)
        assert row["worst_case_output_tokens"] == 1024 * len(mine)
    total = sum(row["usd"] for row in estimate.values())
    assert total == pytest.approx(spend_of(judge.requests), rel=0.10)
    print(f"estimate {total:.6f} USD, real {spend_of(judge.requests):.6f} USD; per scorer: " + ", ".join(
        f"{s} {row['usd']:.6f} / {spend_of([r for r in judge.requests if scorer_of(r) == s]):.6f}"
        for s, row in estimate.items()))


async def test_estimate_table_and_output_tokens_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str], judge: LLMTestServer) -> None:
    """The table has a row per scorer and the total, and no score; ``--estimate-output-tokens``
    counts that many output tokens per call; ``--export`` exports nothing."""
    monkeypatch.setenv("COLUMNS", "250")
    module = scorer_module(tmp_path, monkeypatch, judge)
    code, out, err = await score(capsys, str(FIXTURES / "openai-v2" / "S1.pb"), *refs(module, "relevancy"),
                                 "--estimate", "--estimate-output-tokens", "100", "--format", "jsonl")
    assert code == 0, err
    (row,) = rows(out)
    assert (row["judge_calls"], row["output_tokens"]) == (3, 300)
    assert row["usd"] == pytest.approx(row["prompt_tokens"] * INPUT_PRICE + 300 * OUTPUT_PRICE)
    assert "judge cost estimate" in err and "total" in err  # the table on stderr with jsonl
    config = tmp_path / "ts.toml"
    config.write_text("")
    code, out, err = await score(capsys, str(FIXTURES / "openai-v2" / "S1.pb"), *refs(module, "relevancy", "grounded"),
                                 "--estimate", "--export", "--config", str(config))
    assert code == 0, err
    assert "judge cost estimate (nothing was sent)" in out and "scores per scorer" not in out
    assert re.search(r"answer-relevancy\s+│\s+1\s+│\s+3\s+│", out) and re.search(r"total\s+│\s+2\s+│\s+6\s+│", out)
    assert "exported" not in err and judge.request_count == 0


async def test_max_usd_stops_within_one_calls_cost_and_exits_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str],
                                                              judge: LLMTestServer) -> None:
    module = scorer_module(tmp_path, monkeypatch, judge)
    names = refs(module, "relevancy", "grounded")
    code, out, _ = await score(capsys, *RUN_FILES, *names, "--format", "jsonl")
    assert code == 0
    full = spend_of(judge.requests)
    worst_call = max(r.usage["prompt_tokens"] * INPUT_PRICE + 1024 * OUTPUT_PRICE for r in judge.requests)
    cap = round(full / 2, 6)
    measured = []
    for concurrency in ("1", "16"):
        judge.reset_stats()
        code, out, err = await score(capsys, *RUN_FILES, *names, "--format", "jsonl", "--max-usd", str(cap),
                                     "--concurrency", concurrency)
        assert code == 1, err
        spent = spend_of(judge.requests)
        assert cap - worst_call < spent <= cap  # a refused call's worst case did not fit in what was left
        found = rows(out)
        left = [r for r in found if r["reason"] == "not scored: --max-usd reached"]
        assert left and all(r["score"] is None and r["error"] is None for r in left)
        if concurrency == "1":  # one run at a time: those before the cap are finished
            assert any(r["score"] is not None for r in found)
        reported = re.search(r"--max-usd [0-9.]+: spent ([0-9.]+) USD on (\d+) judge call\(s\); (\d+) of (\d+) "
                             r"score\(s\) not scored \(--max-usd reached\)", err)
        assert reported, err
        assert float(reported.group(1)) == pytest.approx(spent, abs=1e-6)
        assert int(reported.group(2)) == judge.request_count
        assert (int(reported.group(3)), int(reported.group(4))) == (len(left), len(found))
        measured.append(f"--max-usd {cap} at concurrency {concurrency}: spent {spent:.6f} (full run {full:.6f}, one "
                        f"call's worst case up to {worst_call:.6f}); {len(found) - len(left)} of {len(found)} scored")
    print("\n".join(measured))  # after the last readouterr: the figures of a run with -s


async def test_max_usd_exports_only_the_scored_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str], judge: LLMTestServer) -> None:
    module = scorer_module(tmp_path, monkeypatch, judge)
    config = tmp_path / "ts.toml"
    config.write_text("")
    code, out, err = await score(capsys, *RUN_FILES, *refs(module, "grounded"), "--format", "jsonl", "--max-usd",
                                 "0.001", "--concurrency", "1", "--export", "--config", str(config),
                                 "--export-timeout", "30")
    assert code == 1, err
    found = rows(out)
    scored = [r for r in found if r["reason"] != "not scored: --max-usd reached"]
    assert 0 < len(scored) < len(found)
    assert f"exported {len(scored)} score(s)" in err


async def test_an_unpriced_model_is_refused_under_max_usd_unless_allowed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        judge: LLMTestServer) -> None:
    module = scorer_module(tmp_path, monkeypatch, judge, model="openai/tracescore-unpriced-model")
    one_run = str(FIXTURES / "openai-v2" / "S1.pb")
    code, out, err = await score(capsys, one_run, *refs(module, "grounded"), "--max-usd", "1")
    assert code == 2 and out == ""
    assert err.strip() == ("tracescore: --max-usd: no price in litellm for judge model "
                           "openai/tracescore-unpriced-model, so its spend cannot be counted; pass "
                           "--allow-unpriced to score anyway (its calls count 0 USD)")
    assert judge.request_count == 0
    code, out, err = await score(capsys, one_run, *refs(module, "grounded"), "--max-usd", "1", "--allow-unpriced",
                                 "--format", "jsonl")
    assert code == 0, err
    assert rows(out)[0]["score"] == 1.0 and judge.request_count == 3
    code, out, err = await score(capsys, one_run, *refs(module, "grounded"), "--estimate", "--format", "jsonl")
    assert code == 0
    (row,) = rows(out)
    assert (row["usd"], row["worst_case_usd"], row["unpriced_models"]) == (None, None, ["openai/tracescore-unpriced-model"])
    assert row["judge_calls"] == 3 and row["prompt_tokens"] > 0 and "no price in litellm" in err


def test_estimate_and_max_usd_do_not_go_together(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["score", RUN_FILES[0], "--scorer", "scorers.builtin:completeness", "--estimate", "--max-usd", "1"])
    assert exited.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


async def test_a_cap_below_one_calls_worst_case_sends_nothing_and_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        judge: LLMTestServer) -> None:
    module = scorer_module(tmp_path, monkeypatch, judge)
    code, out, err = await score(capsys, *RUN_FILES, *refs(module, "relevancy"), "--max-usd", "0.0005",
                                 "--format", "jsonl")
    assert code == 1 and judge.request_count == 0
    found = rows(out)
    not_scorable = [r for r in found if r["reason"].startswith("not scorable")]  # no answer: no judge call needed
    assert all(r["reason"] == "not scored: --max-usd reached" for r in found if r not in not_scorable)
    assert f"{len(found) - len(not_scorable)} of {len(found)} score(s) not scored" in err
    assert "a judge call may cost up to 0.000" in err and "--default-output-tokens" in err
    code, out, err = await score(capsys, *RUN_FILES, *refs(module, "relevancy"), "--max-usd", "0.0005",
                                 "--default-output-tokens", "200", "--format", "jsonl", "--concurrency", "1")
    assert code == 1, err  # with a 200-token cap calls fit: some runs are scored before the cap stops them
    assert judge.request_count > 0 and spend_of(judge.requests) <= 0.0005
    assert any(r["score"] is not None for r in rows(out)) and "a judge call may cost up to" not in err
