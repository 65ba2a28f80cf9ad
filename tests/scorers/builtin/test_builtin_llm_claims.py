"""Faithfulness, hallucination and context recall against the fake judge server."""

from __future__ import annotations

from typing import Any

import pytest
from builtin_support import by_prefix, prompts

from scorers import Judge, ScorerDefinitionError
from scorers.builtin import context_recall, faithfulness, hallucination
from scorers.utils import make_message, make_tool_call


def verdicts(*values: str) -> dict[str, Any]:
    return {"verdicts": [{"verdict": v, "reason": f"r{i}"} for i, v in enumerate(values)]}


def replies(claims: list[str], judged: dict[str, Any], reason: str = "Because.") -> dict[str, Any]:
    return {"Extract the claims": {"claims": claims}, "Check each claim": judged, "Explain the": reason}


async def test_faithfulness_counts_supported_claims(server: Any, judge: Judge) -> None:
    server.responder = by_prefix(replies(["a", "b", "c"], verdicts("yes", "unsure", "yes")))
    scorer = faithfulness(judge, context=["Paris is the capital of France.", "It has 2M people."])
    result = await scorer.run(input="Tell me about Paris", output="Paris is the capital. It is big.")
    assert result.score == 0.67  # 2 / 3
    assert result.reason == "Because."
    assert result.preprocess_step_result.model_dump() == {"claims": ["a", "b", "c"]}  # an object, not a list
    sent = prompts(server)
    assert sent[0].endswith("Answer:\nParis is the capital. It is big.")
    assert '["Paris is the capital of France.", "It has 2M people."]' in sent[1]
    assert '["a", "b", "c"]' in sent[1]
    assert "- b: unsure (r1)" in sent[2] and "Question: Tell me about Paris" in sent[2]


async def test_faithfulness_uses_tool_results_as_default_context(server: Any, judge: Judge) -> None:
    server.responder = by_prefix(replies(["sunny"], verdicts("yes")))
    output = [make_message("", role="assistant", tool_calls=[make_tool_call("weather", result={"sky": "sunny"})]),
              make_message("It is sunny.", role="assistant")]
    result = await faithfulness(judge, scale=5).run(input="Weather?", output=output)
    assert result.score == 5.0
    assert '["{\\"sky\\": \\"sunny\\"}"]' in prompts(server)[1]


async def test_faithfulness_no_claims_is_zero(server: Any, judge: Judge) -> None:
    server.responder = by_prefix(replies([], verdicts()))
    result = await faithfulness(judge, context=["c"]).run(input="q", output="Hello!")
    assert result.score == 0.0


async def test_faithfulness_not_scorable_without_context_or_answer(server: Any, judge: Judge) -> None:
    no_context = await faithfulness(judge).run(input="q", output="An answer.")
    assert no_context.score is None and no_context.not_scorable.reason == "the run has no context"  # type: ignore[union-attr]
    no_answer = await faithfulness(judge, context=["c"]).run(input="q", output="")
    assert no_answer.not_scorable.reason == "the run has no answer"  # type: ignore[union-attr]
    assert server.requests == []


async def test_context_extractor_wins(server: Any, judge: Judge) -> None:
    server.responder = by_prefix(replies(["x"], verdicts("no")))
    scorer = hallucination(judge, context=["static"], context_extractor=lambda run: [run.ground_truth])
    result = await scorer.run(input="q", output="x", ground_truth="from the run")
    assert '["from the run"]' in prompts(server)[1] and "static" not in prompts(server)[1]
    assert result.score == 0.0


async def test_hallucination_counts_contradicted_claims(server: Any, judge: Judge) -> None:
    server.responder = by_prefix(replies(["a", "b", "c", "d"], verdicts("yes", "no", "no", "no")))
    result = await hallucination(judge, context=["ctx"]).run(input="q", output="Some answer.")
    assert result.score == 0.25
    assert "contradicts the context" in prompts(server)[1]
    assert "hallucination detector" in server.requests[0].message_text("system")


async def test_context_recall_reads_the_ground_truth(server: Any, judge: Judge) -> None:
    server.responder = by_prefix(replies(["g1", "g2"], verdicts("yes", "no")))
    result = await context_recall(judge, context=["doc"]).run(input="q", output="a", ground_truth="GT text.")
    assert result.score == 0.5
    assert prompts(server)[0].endswith("Ground truth:\nGT text.")


async def test_context_recall_without_ground_truth_is_not_scorable(server: Any, judge: Judge) -> None:
    result = await context_recall(judge, context=["doc"]).run(input="q", output="a")
    assert result.not_scorable.reason == "the run has no ground truth"  # type: ignore[union-attr]
    assert server.requests == []


@pytest.mark.parametrize("factory", [faithfulness, hallucination, context_recall])
def test_context_definition_errors(factory: Any) -> None:
    with pytest.raises(ScorerDefinitionError, match="context cannot be empty if provided"):
        factory("openai/gpt-4o-mini", context=[])
    with pytest.raises(ScorerDefinitionError, match="context must be a list of strings"):
        factory("openai/gpt-4o-mini", context="one string")
    with pytest.raises(ScorerDefinitionError, match="context_extractor must be callable"):
        factory("openai/gpt-4o-mini", context_extractor="nope")


async def test_faithfulness_result_serialises_with_object_step_results(server: Any, judge: Judge) -> None:
    """Mastra's preprocess returns a bare array, which its score store rejects (#12876)."""
    import json

    server.responder = by_prefix(replies(["a"], verdicts("yes")))
    result = await faithfulness(judge, context=["c"]).run(input="q", output="a")
    data = json.loads(result.model_dump_json())
    assert data["preprocess_step_result"] == {"claims": ["a"]}
    assert data["analyze_step_result"] == {"verdicts": [{"verdict": "yes", "reason": "r0"}]}
