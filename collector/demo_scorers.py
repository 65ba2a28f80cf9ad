"""Example function scorers used by ``tracescore demo`` (no judge, no API key).

Each is a normal agent-typed scorer built with `scorers.create_scorer`; read them as
examples of the four steps, of `not_scorable`, and of the `scorers.utils` helpers.

* ``keyword_coverage``: share of the question's keywords the answer mentions (0-1);
* ``tool_results``: share of tool calls that got a result (not scorable without tools);
* ``ground_truth_match``: 1 when the answer contains the ground truth (not scorable
  without one).

Example:
    >>> result = keyword_coverage.run_sync(input="What is the capital of France?", output="Paris is the capital.")
    >>> (result.score, result.reason)
    (0.5, 'missing: france')
    >>> tool_results.run_sync(input="Hi", output="Hello!").not_scorable.reason
    'the agent called no tool'
    >>> ground_truth_match.run_sync(input="Capital of Italy?", output="Rome.", ground_truth="rome").score
    1.0
"""

from __future__ import annotations

import re
from typing import Any

from scorers import (
    NotScorable,
    ScorerRun,
    ScorerRunInputForAgent,
    ScorerRunOutputForAgent,
    StepResults,
    create_scorer,
    not_scorable,
)
from scorers.utils import (
    extract_tool_calls,
    extract_tool_results,
    get_assistant_message,
    get_user_message,
    round_to_two_decimals,
)

AgentRun = ScorerRun[ScorerRunInputForAgent, ScorerRunOutputForAgent]

_STOPWORDS = frozenset(
    "a an and are can could did do does for from have how i in is it me my of on one or please "
    "the this to was what when where which who why will with you your".split()
)


def keywords(text: str) -> list[str]:
    """Lowercased content words of ``text`` (stopwords and 1-2 letter words dropped).

    A trailing plural "s" is removed so "flights" matches "flight".

    Example:
        >>> keywords("What is the capital of France?")
        ['capital', 'france']
        >>> keywords("Find flights")
        ['find', 'flight']
    """
    words = re.findall(r"[a-z0-9]+", text.lower())
    found = [w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words]
    return [w for w in found if len(w) > 2 and w not in _STOPWORDS]


def _question_keywords(run: AgentRun) -> dict[str, Any]:
    question = get_user_message(run.input) or ""
    return {"question": question, "keywords": keywords(question)}


def _coverage(run: AgentRun, results: StepResults) -> dict[str, Any]:
    answer = (get_assistant_message(run.output) or "").lower()
    words = results.preprocess_step_result["keywords"]
    return {
        "found": [w for w in words if w in answer],
        "missing": [w for w in words if w not in answer],
    }


def _coverage_score(results: StepResults) -> float | NotScorable:
    found, missing = results.analyze_step_result["found"], results.analyze_step_result["missing"]
    if not found and not missing:
        return not_scorable("the question has no keywords")
    return round_to_two_decimals(len(found) / (len(found) + len(missing)))


def _coverage_reason(results: StepResults, score: float) -> str:
    missing = results.analyze_step_result["missing"]
    return (
        f"missing: {', '.join(missing)}" if missing else "every keyword of the question is answered"
    )


keyword_coverage = (
    create_scorer(
        id="keyword-coverage",
        name="Keyword coverage",
        description="Share of the question's keywords that the answer mentions",
        type="agent",
        version="1",
    )
    .preprocess(_question_keywords)
    .analyze(_coverage)
    .generate_score(_coverage_score)
    .generate_reason(_coverage_reason)
)


def _tool_results(run: AgentRun) -> dict[str, Any] | NotScorable:
    calls = extract_tool_calls(run.output).tool_call_infos
    if not calls:
        return not_scorable("the agent called no tool")
    answered = {r.tool_call_id for r in extract_tool_results(run.output)}
    return {
        "called": [c.tool_name for c in calls],
        "without_result": [c.tool_name for c in calls if c.tool_call_id not in answered],
    }


def _tool_score(results: StepResults) -> float:
    analysis = results.analyze_step_result
    return round_to_two_decimals(1 - len(analysis["without_result"]) / len(analysis["called"]))


def _tool_reason(results: StepResults) -> str:
    missing = results.analyze_step_result["without_result"]
    return f"no result for: {', '.join(missing)}" if missing else "every tool call got a result"


tool_results = (
    create_scorer(
        id="tool-results",
        name="Tool results",
        description="Share of the agent's tool calls that got a result",
        type="agent",
        version="1",
    )
    .analyze(_tool_results)
    .generate_score(_tool_score)
    .generate_reason(_tool_reason)
)


def _ground_truth_score(run: AgentRun) -> float | NotScorable:
    if not run.ground_truth:
        return not_scorable("no ground truth")
    answer = get_assistant_message(run.output) or ""
    return 1.0 if str(run.ground_truth).lower() in answer.lower() else 0.0


ground_truth_match = (
    create_scorer(
        id="ground-truth-match",
        name="Ground truth match",
        description="1 when the answer contains the ground truth",
        type="agent",
        version="1",
    )
    .generate_score(_ground_truth_score)
    .generate_reason(
        lambda run, score: f"the answer {'contains' if score else 'lacks'} {run.ground_truth!r}"
    )
)

DEMO_SCORERS = (keyword_coverage, tool_results, ground_truth_match)
"""The scorers ``tracescore demo`` runs, in display order."""
