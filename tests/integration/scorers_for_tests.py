"""Function scorers the integration tests register by file reference."""

from __future__ import annotations

from scorers import Judge, create_scorer


def _answer(run):  # type: ignore[no-untyped-def]
    return run.output[-1].content if len(run.output) else ""


answer_length = (
    create_scorer(id="answer-length", name="Answer length", description="answer length / 100",
                  type="agent", version="1")
    .analyze(lambda run: {"chars": len(_answer(run))})
    .generate_score(lambda run, results: min(1.0, results.analyze_step_result["chars"] / 100))
    .generate_reason(lambda run, results, score: f"{results.analyze_step_result['chars']} characters")
)


def _boom(run):  # type: ignore[no-untyped-def]
    raise RuntimeError("scorer exploded")


always_fails = create_scorer(id="always-fails", description="fails", type="agent").generate_score(_boom)


context_keys = (
    create_scorer(id="context-keys", description="the keys of run.additional_context", type="agent")
    .generate_score(lambda run: float(len(run.additional_context)))
    .generate_reason(lambda run: repr(run.additional_context))
)


turn_count = (
    create_scorer(id="turn-count", description="a tenth per turn of the conversation", type="conversation")
    .generate_score(lambda run: len(run.turns) / 10)
)


def judged(api_base: str = "http://127.0.0.1:9/v1"):  # type: ignore[no-untyped-def]
    """An LLM judge of the answer, asking the OpenAI-compatible server at ``api_base`` (a factory: ``args``)."""
    judge = Judge(model="openai/gpt-4o-mini", instructions="Rate how helpful the answer is.",
                  model_settings={"api_base": api_base, "api_key": "test-key"})
    return create_scorer(id="helpful", name="Helpful", description="judged", type="agent", judge=judge,
                         version="1").generate_score(
        description="Rate the answer from 0 to 1",
        create_prompt=lambda run: f"Answer: {_answer(run)}\nRate it from 0 to 1.")
