"""Function scorers the backend tests register by file reference (no LLM: scores are fixed by the
answer, so a test knows which runs score low; ``flaky`` fails while its working directory holds
a file ``flaky.broken``, so a test breaks and fixes it under a running daemon; ``tunable`` scores
what its working directory's ``tunable.score`` says, so a run scored again gets another value),
and two judge scorers (``judged`` for runs, ``judged_conversation`` for sessions) asking the
OpenAI-compatible server at ``$TRACESCORE_TEST_JUDGE_URL`` (the loopback test server)."""

from __future__ import annotations

import os
from pathlib import Path

from scorers import Judge, create_scorer


def _answer(run):  # type: ignore[no-untyped-def]
    return run.output[-1].content if len(run.output) else ""


relevance = (
    create_scorer(id="relevance", name="Relevance", description="names the capital?", type="agent", version="1")
    .generate_score(lambda run: 0.9 if "Paris" in _answer(run) else 0.2)
    .generate_reason(lambda run, score: "names Paris" if score > 0.5 else "does not name Paris")
)

brevity = (
    create_scorer(id="brevity", name="Brevity", description="short answer?", type="agent", version="1")
    .generate_score(lambda run: 1.0 if len(_answer(run)) < 80 else 0.0)
)


def _flaky_score(run):  # type: ignore[no-untyped-def]
    if Path("flaky.broken").exists():
        raise RuntimeError("flaky is broken")
    return 1.0


flaky = (
    create_scorer(id="flaky", name="Flaky", description="fails while flaky.broken exists", type="agent",
                  version="1")
    .generate_score(_flaky_score)
    .generate_reason(lambda run, score: "fixed")
)

witness = (
    create_scorer(id="witness", name="Witness", description="always 0.5", type="agent", version="1")
    .generate_score(lambda run: 0.5)
)


def _tuned() -> float:
    tuned = Path("tunable.score")
    return float(tuned.read_text()) if tuned.exists() else 0.5


tunable = (
    create_scorer(id="tunable", name="Tunable", description="the score in tunable.score", type="agent", version="1")
    .generate_score(lambda run: _tuned())
)

turns = (
    create_scorer(id="turns", name="Turns", description="a tenth per turn of the conversation",
                  type="conversation", version="1")
    .generate_score(lambda run: len(run.turns) / 10)
)


def _judge() -> Judge:
    base = os.environ.get("TRACESCORE_TEST_JUDGE_URL", "http://127.0.0.1:9/v1")  # unset: never asked
    return Judge(model="openai/gpt-4o-mini", instructions="You grade an assistant's answers.",
                 model_settings={"api_base": base, "api_key": "test-key"})


judged = (
    create_scorer(id="judged", name="Judged", description="a judge rates the answer", type="agent",
                  judge=_judge(), version="1")
    .generate_score(description="Rate the answer from 0 to 1",
                    create_prompt=lambda run: f"Answer: {_answer(run)}\nRate it from 0 to 1.")
)

judged_conversation = (
    create_scorer(id="judged-conversation", name="Judged conversation", description="a judge rates the conversation",
                  type="conversation", judge=_judge(), version="1")
    .generate_score(description="Rate the conversation from 0 to 1",
                    create_prompt=lambda run: "\n".join(f"{e['role']}: {e['content']}" for e in run.conversation))
)
