"""Judge configuration (`Judge`), its per-step override rules, and the judge execution record.

This module holds only data: executing a judge call lives in `scorers._judge` (which
imports litellm lazily). The scorer engine resolves a step's effective judge with
`merge_judges(scorer_judge, step_judge)` and calls
``scorers._judge.execute_judge_call(judge, prompt, output_schema=...)``.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

JsonPromptInjection = bool | Literal["auto", "system", "inline"]
FallbackJsonPromptInjection = Literal[True, "system", "inline"] | None

DEFAULT_MAX_PROCESSOR_RETRIES = 10
"""Budget of processor-driven retries when error processors are set and no budget is given."""


class Judge(BaseModel):
    """The LLM judge of a scorer (or of one prompt step, overriding the scorer's field by field).

    Args:
        model: a litellm model string ("openai/gpt-4o-mini", "anthropic/...", "ollama/...").
        instructions: the judge's system prompt.
        json_prompt_injection: "auto" (native structured output when litellm says the model
            supports it, else inline), True or "system", "inline", or False (native only).
        fallback_json_prompt_injection: how the schema is injected on the one retry after a
            reply that does not parse or validate. None (the default) keeps the chosen
            injection: "inline" retries inline, True / "system" retry with system
            injection, and "auto" / False (native output) fall back to system injection.
            "system" (or True) or "inline" force that mode (Mastra's
            ``fallbackJsonPromptInjection``).
        input_processors: processors with ``process_input(messages) -> messages``.
        output_processors: processors with ``process_output_result(result) -> result``.
        error_processors: processors with ``process_api_error(error, retry_count)``.
        max_processor_retries: retry budget for error processors (default 10 when error
            processors are set, none otherwise). The processors are still asked about the
            failure that finds the budget spent; their answer is then ignored.
        model_settings: passed through to ``litellm.acompletion`` (api_base, api_key,
            temperature, ...), except two keys the judge itself honours: ``timeout``, the
            seconds each HTTP attempt may take (default 120), and ``max_retries``, the AI
            SDK's ``maxRetries``: retries of a retryable provider error (429, 5xx, timeouts,
            connection errors) with exponential backoff from 1 s, before error processors
            see the error (default 0).

    Example:
        >>> j = Judge(model="openai/gpt-4o-mini", instructions="You are an expert evaluator")
        >>> (j.model, j.json_prompt_injection, j.effective_max_processor_retries)
        ('openai/gpt-4o-mini', 'auto', 0)
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, extra="forbid")

    model: str | None = None
    instructions: str | None = None
    json_prompt_injection: JsonPromptInjection = "auto"
    fallback_json_prompt_injection: FallbackJsonPromptInjection = None
    input_processors: list[Any] | None = None
    output_processors: list[Any] | None = None
    error_processors: list[Any] | None = None
    max_processor_retries: int | None = Field(default=None, ge=0)
    model_settings: dict[str, Any] | None = None

    @field_validator("model_settings")
    @classmethod
    def _check_model_settings(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        retries = (value or {}).get("max_retries")
        if retries is not None and (isinstance(retries, bool) or not isinstance(retries, int)
                                    or retries < 0):
            raise ValueError(f'model_settings["max_retries"] must be a non-negative integer, '
                             f"not {retries!r}")
        timeout = (value or {}).get("timeout")
        if isinstance(timeout, bool) or (isinstance(timeout, int | float)
                                         and not (timeout > 0 and math.isfinite(timeout))):
            raise ValueError(f'model_settings["timeout"] must be a positive number of seconds, '
                             f"not {timeout!r}")
        return value

    def __init__(self, model: str | None = None, instructions: str | None = None, /, **data: Any) -> None:
        """SPEC's signature ``Judge(model, instructions, ...)``: both may be given by position.

        Only what the caller gave counts as set, so a step judge that names neither still
        inherits both from the scorer's judge (`merge_judges`).

        Example:
            >>> Judge("openai/gpt-4o-mini", "Be strict.").model_fields_set == {"model", "instructions"}
            True
        """
        if model is not None:
            if "model" in data:
                raise TypeError("Judge() got model both by position and by keyword")
            data["model"] = model
        if instructions is not None:
            if "instructions" in data:
                raise TypeError("Judge() got instructions both by position and by keyword")
            data["instructions"] = instructions
        super().__init__(**data)

    @property
    def effective_max_processor_retries(self) -> int:
        """The processor retry budget in force: explicit, else 10 with error processors, else 0.

        Example:
            >>> Judge(model="m", instructions="i", error_processors=[object()]).effective_max_processor_retries
            10
        """
        if self.max_processor_retries is not None:
            return self.max_processor_retries
        return DEFAULT_MAX_PROCESSOR_RETRIES if self.error_processors else 0

    def __repr__(self) -> str:
        # model_settings may hold an api_key: never print it.
        settings = sorted((self.model_settings or {}).keys())
        return (
            f"Judge(model={self.model!r}, instructions={self.instructions!r}, "
            f"json_prompt_injection={self.json_prompt_injection!r}, model_settings_keys={settings})"
        )

    __str__ = __repr__


def merge_judges(scorer_judge: Judge | None, step_judge: Judge | None) -> Judge:
    """A step's effective judge: the step's fields win where the step set them (not None).

    Processor lists given on the step replace the scorer's (``[]`` disables them);
    ``max_processor_retries`` and every other field the step leaves unset are inherited;
    ``model_settings`` on the step replaces the scorer's dict wholesale.

    Example:
        >>> base = Judge(model="openai/gpt-4o-mini", instructions="Be strict.", max_processor_retries=2)
        >>> step = Judge(instructions="Be lenient.", error_processors=[])
        >>> merged = merge_judges(base, step)
        >>> (merged.model, merged.instructions, merged.error_processors, merged.max_processor_retries)
        ('openai/gpt-4o-mini', 'Be lenient.', [], 2)
    """
    if scorer_judge is None and step_judge is None:
        return Judge()
    if step_judge is None:
        assert scorer_judge is not None
        return scorer_judge
    if scorer_judge is None:
        return step_judge
    values = dict(scorer_judge)
    for field in step_judge.model_fields_set:
        value = getattr(step_judge, field)
        if value is not None:
            values[field] = value
    return Judge(**values)


class JudgeUsage(BaseModel):
    """Token usage of a judge execution, summed over its attempts.

    Example:
        >>> JudgeUsage(input_tokens=10, output_tokens=5).total_tokens
        15
    """

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    reasoning_tokens: int | None = None
    cached_input_tokens: int | None = None

    def model_post_init(self, __context: Any) -> None:
        if not self.total_tokens:
            object.__setattr__(self, "total_tokens", self.input_tokens + self.output_tokens)


class JudgeExecution(BaseModel):
    """One execution of a prompt step's judge call (all its requests), as recorded on results.

    As in Mastra, ``attempt_count`` counts structured-output attempts: 1, or 2 when the
    JSON fallback ran (a plain-text generate_reason is always 1); ``model_call_count``
    counts the model calls that returned a reply (Mastra's completed model steps), a reply
    that then failed to parse included: a request that failed (a provider error, a timeout,
    a dropped connection), retried or not, is not a model call. ``request_count`` counts
    every request sent to the model: model-level retries (``max_retries``), error-processor
    retries, failed requests and the fallback included (what the judge metrics and
    ``tracescore.judge.attempts`` count; not a Mastra field). A 503, a 503, then a success
    under ``StreamErrorRetryProcessor(max_retries=3)`` is 1 attempt, 1 model call and 3
    requests; a non-retryable 400 is 1 attempt, 0 model calls and 1 request.
    ``prompt`` is the step's prompt, as ``create_prompt`` returned it (input processors such
    as `PIIRedactor` change what is sent, not what is recorded, as in Mastra);
    ``raw_output`` is the model's last reply text, as received; ``output`` the step's value
    (after output processors).

    Example:
        >>> ex = JudgeExecution(status="success", prompt="Score it", output=0.8,
        ...                     model="openai/gpt-4o-mini", attempt_count=1, duration_ms=120)
        >>> (ex.status, ex.output, ex.error)
        ('success', 0.8, None)
    """

    status: Literal["success", "failed"]
    prompt: str
    output: Any = None
    raw_output: str | None = None
    model: str
    provider: str | None = None
    usage: JudgeUsage = Field(default_factory=JudgeUsage)
    cost_usd: float | None = None
    attempt_count: int = 0
    model_call_count: int = 0
    request_count: int = 0
    duration_ms: int = 0
    error: dict[str, Any] | None = None


class JudgeStepRecord(BaseModel):
    """The judge executions of one prompt step.

    Example:
        >>> JudgeStepRecord().executions
        []
    """

    executions: list[JudgeExecution] = Field(default_factory=list)
