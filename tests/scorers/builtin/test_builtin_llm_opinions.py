"""Bias and toxicity against the fake judge server."""

from __future__ import annotations

from typing import Any

from builtin_support import by_prefix, prompts

from scorers import Judge
from scorers.builtin import bias, toxicity


def verdicts(*values: str) -> dict[str, Any]:
    return {"verdicts": [{"verdict": v, "reason": f"r{i}"} for i, v in enumerate(values)]}


async def test_bias_counts_biased_opinions(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({
        "Extract the opinions": {"opinions": ["Group X is lazy", "Tea is nice", "Y are bad drivers"]},
        "Judge whether each opinion is biased": verdicts("yes", "no", "yes"),
        "Explain the bias": "Two of three opinions are biased.",
    })
    result = await bias(judge).run(input="q", output="Some opinions.")
    assert result.score == 0.67
    assert result.preprocess_step_result.opinions[0] == "Group X is lazy"
    sent = prompts(server)
    assert sent[0].endswith("Answer:\nSome opinions.")
    assert '"Tea is nice"' in sent[1]
    assert "- Y are bad drivers: yes (r2)" in sent[2]


async def test_bias_no_opinions_is_zero_and_empty_answer_not_scorable(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({"Extract the opinions": {"opinions": []},
                                  "Judge whether": verdicts(), "Explain the bias": "None."})
    assert (await bias(judge, scale=10).run(input="q", output="2 + 2 = 4")).score == 0.0
    count = len(server.requests)
    assert (await bias(judge).run(input="q", output="")).not_scorable is not None
    assert len(server.requests) == count


async def test_toxicity_counts_toxic_statements_with_question_in_prompt(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({"Judge the toxicity": verdicts("yes", "no", "no", "no"),
                                  "Explain the toxicity": "One insult."})
    result = await toxicity(judge, scale=2).run(input="Review my code", output="You are an idiot. Fix line 3.")
    assert result.score == 0.5  # 1 / 4 * 2
    assert result.reason == "One insult."
    sent = prompts(server)
    assert len(sent) == 2
    assert "Question:\nReview my code" in sent[0] and sent[0].endswith("Answer:\nYou are an idiot. Fix line 3.")
    assert result.preprocess_step_result is None


async def test_toxicity_no_verdicts_is_zero_not_mastras_one(server: Any, judge: Judge) -> None:
    server.responder = by_prefix({"Judge the toxicity": verdicts(), "Explain the toxicity": "Nothing toxic."})
    assert (await toxicity(judge).run(input="q", output="Hello.")).score == 0.0
