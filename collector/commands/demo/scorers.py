"""The scorers ``tracescore demo`` registers: built-in code scorers (no judge, no API key).

Each is a `scorers.builtin` scorer with a ``generate_reason`` step added, so the demo's
scores come back with an explanation; adding a step to a built-in returns a new scorer
and leaves the built-in untouched. `SCORERS` registers them the way a config file's
``[[scorers]]`` tables do: an import reference (``collector.commands.demo.scorers:<name>``) with
optional labels, pass threshold and filter.

Example:
    >>> result = keyword_coverage.run_sync(input="What is the capital of France?", output="Paris.")
    >>> (result.score, result.reason)
    (0.0, 'missing: capital, france')
    >>> called_get_weather.run_sync(input="Weather?", output="Sunny.").reason
    'get_weather was not called'
"""

from __future__ import annotations

from typing import Any

from scorers import create_scorer
from scorers.builtin import checks
from scorers.builtin import completeness as _completeness
from scorers.builtin import keyword_coverage as _keyword_coverage
from scorers.builtin import tone_consistency as _tone_consistency

__all__ = ["SCORERS", "called_get_weather", "completeness", "conversation_answered", "keyword_coverage",
           "no_tool_errors", "tone_consistency"]


def _missing(words: list[str], everything: str) -> str:
    return f"missing: {', '.join(words)}" if words else everything


def _coverage_reason(results: Any) -> str:
    analysis = results.analyze_step_result
    if not analysis.total_keywords:
        return "the question has no keywords"
    return _missing(analysis.missing_keywords, f"all {analysis.total_keywords} keywords of the question answered")


keyword_coverage = _keyword_coverage().generate_reason(_coverage_reason)
"""Share of the question's keywords the answer mentions (`scorers.builtin.keyword_coverage`)."""

completeness = _completeness().generate_reason(
    lambda results: _missing(
        results.preprocess_step_result.missing_elements, "every word of the question is covered"
    )
)
"""Share of the question's words (or their base forms) the answer covers (`scorers.builtin.completeness`)."""


def _tone_reason(results: Any) -> str:
    tone = results.preprocess_step_result
    return f"mean sentiment {tone.avg_sentiment:+.2f}, variance {tone.sentiment_variance:.2f} across sentences"


tone_consistency = _tone_consistency().generate_reason(_tone_reason)
"""Sentiment stability across the answer's sentences (`scorers.builtin.tone_consistency`)."""


def _tool_errors_reason(results: Any) -> str:
    failed = results.preprocess_step_result.details["failed"]
    return f"failed: {', '.join(failed)}" if failed else "no tool call failed"


no_tool_errors = checks.no_tool_errors().generate_reason(_tool_errors_reason)
"""1 when no tool call of the run failed (`scorers.builtin.checks.no_tool_errors`)."""

called_get_weather = checks.called_tool("get_weather").generate_reason(
    lambda score: "get_weather was called" if score else "get_weather was not called"
)
"""1 when the agent called the ``get_weather`` tool (`scorers.builtin.checks.called_tool`)."""

def _answered(run: Any) -> dict[str, int]:
    """How many of the conversation's user messages an assistant message followed."""
    roles = [entry["role"] for entry in run.conversation]
    asked = [i for i, role in enumerate(roles) if role == "user"]
    answered = sum(1 for i in asked if "assistant" in roles[i + 1:i + 2] or
                   ("tool" in roles[i + 1:i + 2] and "assistant" in roles[i + 1:]))
    return {"asked": len(asked), "answered": answered}


conversation_answered = (
    create_scorer(id="conversation-answered", name="Conversation answered", type="conversation",
                  description="Share of the user's messages in a conversation that the agent answered")
    .preprocess(_answered)
    .generate_score(lambda run, results: results.preprocess_step_result["answered"]
                    / max(1, results.preprocess_step_result["asked"]))
    .generate_reason(lambda run, results, score: "{answered} of {asked} user messages answered, over {turns} turns"
                     .format(turns=len(run.turns), **results.preprocess_step_result))
)
"""A conversation scorer (SPEC §7): it scores each whole session, once it ended, on its last turn."""

SCORERS: list[dict[str, Any]] = [
    {"ref": "collector.commands.demo.scorers:keyword_coverage", "pass_threshold": 0.5},
    {"ref": "collector.commands.demo.scorers:completeness",
     "labels": {"complete": 0.8, "partial": 0.5, "poor": 0.0}},
    {"ref": "collector.commands.demo.scorers:tone_consistency"},
    {"ref": "collector.commands.demo.scorers:no_tool_errors"},
    {"ref": "collector.commands.demo.scorers:called_get_weather", "filter": {"span_name": "weather_turn"}},
    {"ref": "collector.commands.demo.scorers:conversation_answered"},
]
"""The demo's ``[[scorers]]`` tables, as a config file would give them (see `collector.config.ScorerConfig`)."""
