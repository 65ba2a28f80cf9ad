"""LLM-judged instruction following: prompt alignment and tool-call accuracy (LLM)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from scorers._builder import Scorer
from scorers.builtin._common import JudgeOption, answer_text, user_text
from scorers.builtin._llm_common import JudgeSchema, builder, bullet, prompt, reason_prompt, scaled
from scorers.errors import ScorerDefinitionError, ScorerInputError
from scorers.utils import extract_tool_calls, get_combined_system_prompt

Mode = Literal["user", "system", "both"]
USER_WEIGHTS = {"intent_alignment": 0.4, "requirements_fulfillment": 0.3, "completeness": 0.2, "response_appropriateness": 0.1}
SYSTEM_WEIGHTS = {"intent_alignment": 0.35, "requirements_fulfillment": 0.35, "completeness": 0.15, "response_appropriateness": 0.15}


class Requirement(JudgeSchema):
    """One explicit or implicit requirement of the prompt and whether the answer met it."""

    requirement: str
    fulfilled: bool
    reasoning: str = ""


class Alignment(JudgeSchema):
    """How well the answer follows one prompt, per dimension (each 0-1)."""

    intent_alignment: float = Field(ge=0, le=1)
    requirements_fulfillment: float = Field(ge=0, le=1)
    completeness: float = Field(ge=0, le=1)
    response_appropriateness: float = Field(ge=0, le=1)
    requirements: list[Requirement] = Field(default_factory=list)
    missing_elements: list[str] = Field(default_factory=list)
    reasoning: str = ""

    def weighted(self, weights: Mapping[str, float]) -> float:
        """The weighted sum of the four dimensions.

        Example:
            >>> Alignment(intent_alignment=1, requirements_fulfillment=0.5, completeness=0,
            ...           response_appropriateness=1).weighted(USER_WEIGHTS)
            0.65
        """
        return float(sum(getattr(self, name) * weight for name, weight in weights.items()))


class UserAlignment(JudgeSchema):
    """The answer's alignment with the user's prompt."""

    user: Alignment


class SystemAlignment(JudgeSchema):
    """The answer's alignment with the system prompt."""

    system: Alignment


class BothAlignment(JudgeSchema):
    """The answer's alignment with the user's prompt and with the system prompt."""

    user: Alignment
    system: Alignment


_SCHEMAS: dict[str, type[BaseModel]] = {"user": UserAlignment, "system": SystemAlignment, "both": BothAlignment}
_DIMENSIONS = (
    "intent_alignment (does it address what was really asked), requirements_fulfillment (share "
    "of the explicit and implicit requirements met, listed in requirements), completeness "
    "(nothing needed is missing, listed in missing_elements), response_appropriateness (format "
    "and tone fit the request)"
)


def alignment_score(analysis: BaseModel, mode: Mode) -> float:
    """The prompt-alignment score (0-1, before scaling) of a judge analysis.

    user: the user weights (intent 0.4, requirements 0.3, completeness 0.2,
    appropriateness 0.1); system: the system weights (0.35, 0.35, 0.15, 0.15); both: 0.7 *
    user + 0.3 * system, each judged separately (Mastra reuses the user score for the
    system part).

    Example:
        >>> a = Alignment(intent_alignment=1, requirements_fulfillment=1, completeness=1, response_appropriateness=1)
        >>> b = Alignment(intent_alignment=0, requirements_fulfillment=0, completeness=0, response_appropriateness=0)
        >>> round(alignment_score(BothAlignment(user=a, system=b), "both"), 4)
        0.7
    """
    if isinstance(analysis, BothAlignment):
        return 0.7 * analysis.user.weighted(USER_WEIGHTS) + 0.3 * analysis.system.weighted(SYSTEM_WEIGHTS)
    if isinstance(analysis, SystemAlignment):
        return analysis.system.weighted(SYSTEM_WEIGHTS)
    assert isinstance(analysis, UserAlignment)
    return analysis.user.weighted(USER_WEIGHTS)


def prompt_alignment(
    judge: JudgeOption, *, evaluation_mode: Mode = "both", scale: float = 1.0, id: str = "prompt-alignment"
) -> Scorer[Any, Any]:
    """How well the answer follows the user's prompt and/or the system prompt (Mastra's
    prompt alignment).

    Steps: analyze (judge) scores each prompt the mode asks for on four dimensions
    (`Alignment`); score = `alignment_score` times ``scale``, rounded: higher is better;
    generate_reason (judge) explains it. The system prompt is every system message of the
    input (`scorers.utils.get_combined_system_prompt`).

    At run time the analyze step fails with a `ScorerInputError` when the answer is empty
    (``"Agent response is required for prompt alignment scoring"``) or when a prompt the
    mode needs is missing (``"User prompt is required..."`` for user and both,
    ``"System prompt is required..."`` for system and both).

    Args:
        judge: a `Judge`, a dict of its fields, or a model string.
        evaluation_mode: "user", "system" or "both".
        scale: the score of a perfectly aligned answer.
        id: the scorer id.

    Example:
        >>> prompt_alignment("openai/gpt-4o-mini", evaluation_mode="system").id
        'prompt-alignment'
    """
    if evaluation_mode not in _SCHEMAS:
        raise ScorerDefinitionError(f"prompt_alignment: evaluation_mode must be 'user', 'system' or 'both', got {evaluation_mode!r}")

    def analyze(run: Any) -> str:
        answer, user, system = answer_text(run.output), user_text(run.input), get_combined_system_prompt(run.input)
        if not answer.strip():
            raise ScorerInputError("Agent response is required for prompt alignment scoring", field="run.output")
        if evaluation_mode != "system" and not user.strip():
            raise ScorerInputError(f"User prompt is required for {evaluation_mode} prompt alignment scoring", field="run.input")
        if evaluation_mode != "user" and not system.strip():
            raise ScorerInputError(f"System prompt is required for {evaluation_mode} prompt alignment scoring", field="run.input")
        which = {"user": "the user's prompt", "system": "the system prompt",
                 "both": "the user's prompt (as user) and, separately, the system prompt (as system)"}[evaluation_mode]  # fmt: skip
        keys = ", ".join(f'"{k}": {{...}}' for k in _SCHEMAS[evaluation_mode].model_fields)
        return (
            f"Evaluate how well the answer follows {which}. Score each dimension from 0 to 1: "
            f"{_DIMENSIONS}; add a short reasoning. Return {{{keys}}}.\n\n"
            + (f"System prompt:\n{system}\n\n" if evaluation_mode != "user" else "")
            + (f"User prompt:\n{user}\n\n" if evaluation_mode != "system" else "")
            + f"Answer:\n{answer}"
        )

    def reason(results: Any, score: float) -> str:
        parts = [f"{name}: {a.model_dump(include=set(USER_WEIGHTS))}; missing {bullet(a.missing_elements)}"
                 for name, a in results.analyze_step_result if isinstance(a, Alignment)]  # fmt: skip
        return reason_prompt(f"prompt alignment ({evaluation_mode})", scale, f"Score: {score}\n" + "\n".join(parts))

    return (
        builder(id, "Prompt Alignment", f"How well the answer follows the prompts ({evaluation_mode})", judge,
                "You are a precise prompt alignment evaluator: you judge whether an answer does what its prompt asked, in the way it asked.", scale)
        .analyze(prompt("Score the answer's alignment with the prompts", analyze, _SCHEMAS[evaluation_mode]))
        .generate_score(lambda results: scaled(alignment_score(results.analyze_step_result, evaluation_mode), scale))
        .generate_reason(prompt("Explain the prompt alignment score", reason))
    )  # fmt: skip


class ToolEvaluation(JudgeSchema):
    """Whether one tool call was appropriate for the request."""

    tool_called: str
    was_appropriate: bool
    reasoning: str = ""


class ToolCallAnalysis(JudgeSchema):
    """The judge's evaluation of each call and the tools that should have been called."""

    evaluations: list[ToolEvaluation] = Field(default_factory=list)
    missing_tools: list[str] = Field(default_factory=list)


class ToolCalls(JudgeSchema):
    """The tools the agent called (from the output, not from the judge)."""

    actual_tools: list[str]


def _tool_line(tool: Any) -> str:
    if isinstance(tool, str):
        return f"- {tool}"
    if isinstance(tool, Mapping):
        name, description = tool.get("name") or tool.get("id"), tool.get("description", "")
    else:
        name, description = getattr(tool, "name", None) or getattr(tool, "id", None), getattr(tool, "description", "")
    if not name:
        raise ScorerDefinitionError(f"tool_call_accuracy_llm: a tool needs a name (or id), got {tool!r}")
    return f"- {name}: {description}" if description else f"- {name}"


def tool_call_accuracy_llm(
    judge: JudgeOption, *, available_tools: Sequence[Any], scale: float = 1.0, id: str = "llm-tool-call-accuracy"
) -> Scorer[Any, Any]:
    """Whether each tool the agent called was appropriate for the request (Mastra's LLM
    tool-call accuracy).

    Steps: preprocess (code) takes the tool calls from the output (`ToolCalls`: the actual
    calls, never the judge's guess); analyze (judge) evaluates each call against the user's
    request and the available tools, and lists tools that should have been called; score
    = appropriate / evaluations times ``scale``, rounded: higher is better. With no tool
    call: 1 when the judge lists no missing tool (not calling was right), else 0; calls
    but no evaluations gives 0.

    Args:
        judge: a `Judge`, a dict of its fields, or a model string.
        available_tools: the agent's tools: names, ``{"name"/"id", "description"}`` dicts,
            or objects with those attributes.
        scale: the score when every call was appropriate.
        id: the scorer id.

    Example:
        >>> tool_call_accuracy_llm("openai/gpt-4o-mini", available_tools=[
        ...     {"name": "get_weather", "description": "Weather for a city"}, "search"]).id
        'llm-tool-call-accuracy'
    """
    if isinstance(available_tools, str | bytes) or not available_tools:
        raise ScorerDefinitionError("tool_call_accuracy_llm: available_tools must be a non-empty list of tools")
    tools_text = "\n".join(_tool_line(t) for t in available_tools)

    def evaluate(run: Any, results: Any) -> str:
        calls = results.preprocess_step_result.actual_tools
        return (
            "Evaluate the agent's tool calls for the user's request. For each call, in order, "
            "say whether it was appropriate (the right tool for what was asked); list in "
            "missing_tools the available tools it should also have called. Return "
            '{"evaluations": [{"tool_called": ..., "was_appropriate": ..., "reasoning": ...}], '
            '"missing_tools": [...]}.\n\n'
            f"User request:\n{user_text(run.input)}\n\nAvailable tools:\n{tools_text}\n\n"
            f"Tool calls made:\n{bullet(calls)}\n\nAnswer:\n{answer_text(run.output)}"
        )

    def score(results: Any) -> float:
        analysis, calls = results.analyze_step_result, results.preprocess_step_result.actual_tools
        if not calls:
            return 0.0 if analysis.missing_tools else scaled(1.0, scale)
        if not analysis.evaluations:
            return 0.0
        appropriate = sum(1 for e in analysis.evaluations if e.was_appropriate)
        return scaled(appropriate / len(analysis.evaluations), scale)

    def reason(results: Any, score: float) -> str:
        a = results.analyze_step_result
        lines = "\n".join(f"- {e.tool_called}: {'appropriate' if e.was_appropriate else 'inappropriate'} ({e.reasoning})"
                          for e in a.evaluations)  # fmt: skip
        return reason_prompt("tool call accuracy", scale,
                             f"Score: {score}\nEvaluations:\n{lines or '(no tool calls)'}\nMissing tools: {bullet(a.missing_tools)}")

    return (
        builder(id, "Tool Call Accuracy (LLM)", "Whether each tool call was appropriate for the request", judge,
                "You are an expert evaluator of AI agents' tool use: you judge whether each tool call fits the user's request.", scale)
        .preprocess(lambda run: ToolCalls(actual_tools=extract_tool_calls(run.output).tools))
        .analyze(prompt("Evaluate each tool call", evaluate, ToolCallAnalysis))
        .generate_score(score)
        .generate_reason(prompt("Explain the tool call accuracy score", reason))
    )  # fmt: skip
