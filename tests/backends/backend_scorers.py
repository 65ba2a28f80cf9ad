"""Function scorers the backend tests register by file reference (no LLM: scores are fixed by the
answer, so a test knows which runs score low)."""

from __future__ import annotations

from scorers import create_scorer


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
