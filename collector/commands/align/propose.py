"""The proposer of ``tracescore align``: rewritten judge instructions from people's disagreements.

The proposer model is asked once per candidate (``--candidates``), through the judge client
(`scorers._judge.execute_judge_call`, litellm's ``acompletion``) and so under the same spend
governors as the judge's calls. Its system message says what to do; the user message holds
the scorer's description, how its scores become verdicts, the current instructions, and the
train items where the current judge disagreed with the people (what the judge was shown, its
score and reason, the people's verdict and rationale), up to `MAX_DISAGREEMENTS`.

The proposer's settings (`proposer_judge`): when its model is of the judge's provider (the
part of the litellm model string before ``/``), it is called with the judge's
``model_settings`` (``api_base``, ``api_key``, ...); otherwise with none, and litellm reads
the provider's usual variables. ``--proposer-api-base`` sets its ``api_base`` either way.

A reply is a candidate only when it is usable instructions (`usable`): not empty, not a
refusal, not JSON, not the current instructions unchanged. Any other reply is a failed
candidate: reported with the reason, never measured, never adopted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from collector.commands.align.items import LabelledItem
from collector.commands.align.judging import Judged
from collector.status.verdicts import ScorerRule
from scorers._judge_governor import JudgeGovernor, govern_judge_calls
from scorers._judge_types import Judge

__all__ = ["MAX_DISAGREEMENTS", "PROPOSER_INSTRUCTIONS", "ask", "proposer_judge", "proposer_prompt", "usable"]

MAX_DISAGREEMENTS = 20
"""Disagreements shown to the proposer at most (the newest labelled first)."""

MAX_SHOWN_CHARS = 1500
"""Each disagreement's content is cut to this many characters."""

PROPOSER_INSTRUCTIONS = (
    "You rewrite the instructions (the system prompt) of an LLM judge so that its verdicts agree with the "
    "verdicts of the people who know the domain. You are given the current instructions and items where the "
    "judge and the people disagreed, with the people's rationale. Write improved instructions that would make "
    "the judge reach the people's verdicts on such items and on new ones: state the criteria the people apply, "
    "generally, not item by item. Keep what the current instructions say about the form of the judge's answer. "
    "Reply with the new instructions only: plain text addressed to the judge, no preamble, no JSON, no code "
    "fences."
)
"""The proposer's system message."""

_REFUSALS = re.compile(r"^\s*(i'?m sorry|i am sorry|sorry\b|i can(?:not|'t)|i am unable|i'?m unable|i won'?t|"
                       r"as an ai\b|i must decline|unfortunately,? i)", re.IGNORECASE)


def _provider(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else model


def proposer_judge(model: str, judge: Judge, api_base: str | None = None) -> Judge:
    """The proposer as a judge client call: its model, `PROPOSER_INSTRUCTIONS`, and its settings
    (the judge's when of the judge's provider; ``api_base`` overrides).

    Example:
        >>> judge = Judge("openai/gpt-4o-mini", "Be fair.", model_settings={"api_base": "http://h/v1", "api_key": "k"})
        >>> proposer_judge("openai/gpt-4o", judge).model_settings
        {'api_base': 'http://h/v1', 'api_key': 'k'}
        >>> proposer_judge("anthropic/claude-sonnet-4-5", judge).model_settings is None
        True
        >>> proposer_judge("anthropic/claude-sonnet-4-5", judge, "http://p/v1").model_settings
        {'api_base': 'http://p/v1'}
    """
    settings = dict(judge.model_settings or {}) if judge.model and _provider(model) == _provider(judge.model) else {}
    if api_base:
        settings["api_base"] = api_base
    return Judge(model, PROPOSER_INSTRUCTIONS, model_settings=settings or None)


def _cut(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + " […]"


def _verdicts(rule: ScorerRule) -> str:
    if rule.categorical:
        return f"its score's label is the verdict, one of: {', '.join(rule.categories)}"
    return f"a score of at least {rule.pass_threshold:g} is a pass, below it a fail"


def proposer_prompt(description: str, instructions: str, rule: ScorerRule,
                    disagreements: Sequence[tuple[LabelledItem, Judged]], number: int, count: int) -> str:
    """The user message asking for candidate ``number`` of ``count``.

    Example:
        >>> from types import SimpleNamespace as I
        >>> item = I(verdict="fail", rationale="rude to the user", labelled_at=1.0)
        >>> text = proposer_prompt("Whether the answer is polite", "Judge the answer.", ScorerRule("tone", "Tone"),
        ...                        [(item, Judged(0.9, "pass", "friendly enough", "Answer: Go away."))], 2, 4)
        >>> print(text[text.index("Disagreement 1"):])
        Disagreement 1
        The judge was shown:
        Answer: Go away.
        The judge's score: 0.9 (pass); its reason: friendly enough
        The people's verdict: fail; their rationale: rude to the user
        <BLANKLINE>
        Write candidate 2 of 4 (each candidate is asked separately: take your own approach).
    """
    shown = sorted(disagreements, key=lambda pair: -pair[0].labelled_at)[:MAX_DISAGREEMENTS]
    parts = [f"What the judge measures: {description}",
             f"How its scores become verdicts: {_verdicts(rule)}.",
             f"The current instructions:\n<<<\n{instructions}\n>>>"]
    if not shown:
        parts.append("The judge agreed with the people on every train item; make the criteria explicit all the same.")
    else:
        parts.append(f"Items where the judge disagreed with the people ({len(shown)} of {len(disagreements)}):")
    for n, (item, judged) in enumerate(shown, 1):
        reason = "" if judged.reason in (None, "") else f"; its reason: {_cut(str(judged.reason), 500)}"
        rationale = f"; their rationale: {item.rationale}" if item.rationale else ""
        parts.append(f"Disagreement {n}\nThe judge was shown:\n{_cut(judged.prompt or '(not recorded)')}\n"
                     f"The judge's score: {judged.score:g} ({judged.verdict}){reason}\n"
                     f"The people's verdict: {item.verdict}{rationale}")
    parts.append(f"Write candidate {number} of {count} (each candidate is asked separately: take your own approach).")
    return "\n\n".join(parts)


def _unfenced(text: str) -> str:
    match = re.fullmatch(r"```[\w-]*\n(.*?)\n?```", text.strip(), re.DOTALL)
    return match.group(1).strip() if match else text.strip()


def usable(reply: Any, current: str) -> tuple[str | None, str | None]:
    """``(instructions, None)`` when the proposer's reply is usable instructions (a code fence
    around plain text is taken off), else ``(None, why not)``.

    Example:
        >>> usable("Judge politeness: a rude answer fails, whatever it says.", "Be fair.")
        ('Judge politeness: a rude answer fails, whatever it says.', None)
        >>> [usable(r, "Be fair.")[1] for r in ("", '{"instructions": "Be kind."}', "I'm sorry, I can't help with that.",
        ...                                     "Be fair.", "```json\\n[1]\\n```", "Be nice.")]
        ['empty reply', 'a JSON reply, not instructions', 'a refusal', 'the current instructions unchanged', 'a JSON reply, not instructions', 'too short to be instructions']
    """
    text = _unfenced(str(reply or ""))
    if not text:
        return None, "empty reply"
    try:
        json.loads(text)
    except ValueError:
        pass
    else:
        return None, "a JSON reply, not instructions"
    if _REFUSALS.match(text):
        return None, "a refusal"
    if " ".join(text.split()) == " ".join(current.split()):
        return None, "the current instructions unchanged"
    if len(text.split()) < 3:
        return None, "too short to be instructions"
    return text, None


async def ask(proposer: Judge, prompt: str, governor: JudgeGovernor | None, scorer_id: str) -> str:
    """The proposer's reply to ``prompt`` (its calls governed as the judge's, for ``scorer_id``).

    Raises:
        scorers.errors.JudgeError: the provider failed, or a governor refused the call.
    """
    from scorers._judge import execute_judge_call

    with govern_judge_calls(governor, scorer_id):
        value, _ = await execute_judge_call(proposer, prompt, output_schema=None)
    return str(value or "")
