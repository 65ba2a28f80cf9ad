"""Errors raised by the scorer API.

Tree::

    ScorerError                      base of everything raised here
    ├── ScorerDefinitionError        a mistake in how a scorer was built (raised at build time),
    │                                also a ValueError
    ├── ScorerInputError             run.input / run.output (or what prepare_run returned) does
    │                                not validate against the scorer's types; names the field.
    │                                Raised as the cause of a ScorerRunError; also a ValueError
    ├── ScorerRunError               a run failed in a step: scorer_id, failed_step,
    │                                completed_steps, partial_result (what completed, plus
    │                                the failed step's judge executions); the cause is chained
    └── JudgeError                   one judge call failed for good: retryable, retry_after_s,
        │                            execution (the recorded judge execution, when one started)
        ├── JudgeOutputError         the judge answered, twice, with text that is not valid
        │                            output for the step's schema
        └── JudgeCredentialsError    the judge's credentials are missing or refused (never
                                     retried): missing_env names the variables to set

Messages follow Mastra's where Mastra has one ("Scorer Run Failed: <cause>",
'Step "<name>" requires a model and instructions').
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scorers._judge_types import JudgeExecution


class ScorerError(Exception):
    """Base class of every error raised by `scorers`.

    Example:
        >>> issubclass(ScorerRunError, ScorerError)
        True
    """


class ScorerDefinitionError(ScorerError, ValueError):
    """A scorer was built wrongly (missing id, duplicate step, bad step definition...).

    Example:
        >>> str(ScorerDefinitionError("Scorers must have an ID field."))
        'Scorers must have an ID field.'
    """


class ScorerInputError(ScorerError, ValueError):
    """A run's input or output does not match the scorer's declared types.

    ``run()`` raises it as the chained cause of a `ScorerRunError` (``failed_step`` None).

    Attributes:
        field: what failed to validate: "run.input", "run.output", "run" (run() arguments) or
            "prepare_run".

    Example:
        >>> err = ScorerInputError('run.input is not a valid Q: question: Field required', field="run.input")
        >>> (err.field, "question" in str(err))
        ('run.input', True)
    """

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class ScorerRunError(ScorerError):
    """A scorer run failed in one of its steps.

    Attributes:
        scorer_id: the scorer's id.
        failed_step: the step that raised ("preprocess", "analyze", "generate_score",
            "generate_reason"), or None when no step can be named.
        completed_steps: the steps that finished before it, in order.
        partial_result: as Mastra's ``error.result``, a `ScorerResult` with the run's
            fields (input, output, run_id...), the completed steps' results, prompts and
            judge executions (the score if generate_score completed), and the failed
            step's judge executions under ``judge[failed_step]``: the failed call's record
            (the chained `JudgeError`'s ``execution``, with its prompt, usage, counts and
            error) and any call of that step that succeeded before it failed. The failed
            step's ``<step>_prompt`` and result stay None. None when no step completed and
            the failed step made no judge attempt.

    Example:
        >>> err = ScorerRunError("s1", "analyze", ["preprocess"], cause=RuntimeError("boom"))
        >>> (str(err), err.failed_step, err.completed_steps)
        ('Scorer Run Failed: boom', 'analyze', ['preprocess'])
    """

    def __init__(
        self,
        scorer_id: str,
        failed_step: str | None,
        completed_steps: list[str],
        *,
        cause: BaseException | None = None,
        partial_result: Any = None,
    ) -> None:
        cause_text = str(cause) if cause is not None and str(cause) else "Scorer workflow failed"
        super().__init__(f"Scorer Run Failed: {cause_text}")
        self.scorer_id = scorer_id
        self.failed_step = failed_step
        self.completed_steps = list(completed_steps)
        self.partial_result = partial_result
        if cause is not None:
            self.__cause__ = cause

    def __reduce__(self) -> Any:
        # Pickle without the partial result (it may hold prompts and raw judge output).
        return (
            _rebuild_run_error,
            (str(self), self.scorer_id, self.failed_step, self.completed_steps),
        )


def _rebuild_run_error(
    message: str, scorer_id: str, failed_step: str | None, completed: list[str]
) -> ScorerRunError:
    err = ScorerRunError(scorer_id, failed_step, completed)
    err.args = (message,)
    return err


class JudgeError(ScorerError):
    """A judge call failed after every retry it was allowed.

    Attributes:
        retryable: whether the provider said the failure was transient (429, 5xx, timeouts,
            connection errors).
        retry_after_s: the provider's Retry-After hint in seconds, when it sent one.
        status_code: the HTTP status of the provider's answer, when there was one.
        execution: the recorded `JudgeExecution` of the failed call, when one started.

    Example:
        >>> err = JudgeError("rate limited", retryable=True, retry_after_s=2.0, status_code=429)
        >>> (err.retryable, err.retry_after_s, err.status_code)
        (True, 2.0, 429)
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        retry_after_s: float | None = None,
        status_code: int | None = None,
        execution: JudgeExecution | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after_s = retry_after_s
        self.status_code = status_code
        self.execution = execution


class JudgeOutputError(JudgeError):
    """The judge's reply could not be parsed or validated, even after the one fallback retry.

    Attributes:
        raw_output: the start of the last reply.

    Example:
        >>> JudgeOutputError("Judge output is not valid JSON: 'hello'", raw_output="hello").raw_output
        'hello'
    """

    def __init__(
        self, message: str, *, raw_output: str | None = None, execution: JudgeExecution | None = None
    ) -> None:
        super().__init__(message, retryable=False, execution=execution)
        self.raw_output = raw_output


class JudgeCredentialsError(JudgeError):
    """The judge's provider has no credentials (no key in the environment or ``model_settings``)
    or refused them (401, 403): a problem of the judge's configuration, never retried (not by
    the model's retries, not by error processors, not by the daemon as a transient failure).

    Attributes:
        missing_env: the environment variables litellm says the provider reads its key from,
            when none of them is set (empty when the credentials were refused, or given in
            ``model_settings``).

    Example:
        >>> err = JudgeCredentialsError("no key", missing_env=("OPENAI_API_KEY",), status_code=401)
        >>> (err.retryable, err.missing_env, err.status_code)
        (False, ('OPENAI_API_KEY',), 401)
    """

    def __init__(
        self, message: str, *, missing_env: tuple[str, ...] = (), status_code: int | None = None,
        execution: JudgeExecution | None = None,
    ) -> None:
        super().__init__(message, retryable=False, status_code=status_code, execution=execution)
        self.missing_env = missing_env
