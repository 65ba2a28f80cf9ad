"""Model-level retries of a judge request: ``model_settings["max_retries"]``, as the AI SDK's
``maxRetries``.

A request that fails with a retryable provider error (HTTP 408, 409, 429 or 5xx, a
timeout, a connection error: anything in the error's chain that `is_provider_retryable`
accepts) is sent again up to ``max_retries`` times, after an exponential backoff of
`MODEL_RETRY_BASE_DELAY_S` x 2^(retry - 1) (1 s, 2 s, 4 s...). A provider's Retry-After
hint raises a delay, capped at 30 s: ``max(backoff, min(retry_after, 30 s))``. Missing or
refused credentials are never retried, even when litellm gave them a 5xx status. Only when
these retries are spent do the judge's error processors see the error (Mastra's order:
the model's own retries sit under the processor layer), so the two multiply: at most
``(max_retries + 1) x (processor retries + 1)`` requests. The default is 0 retries, as
Mastra's judge behaves.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scorers._processors import is_provider_retryable, is_terminal_auth_error
from scorers._retry_after import DEFAULT_MAX_RETRY_AFTER_MS, iter_error_chain, parse_retry_after_ms

MODEL_RETRY_BASE_DELAY_S = 1.0
"""The first model-level retry waits this long; each further one twice the previous."""


def max_retries_of(settings: Mapping[str, Any] | None) -> int:
    """The model-level retry count a judge's ``model_settings`` asks for (0 when unset).

    `Judge` validates the setting (a non-negative integer) when it is made.

    Example:
        >>> max_retries_of({"max_retries": 2}), max_retries_of(None), max_retries_of({"max_retries": None})
        (2, 0, 0)
    """
    return int((settings or {}).get("max_retries") or 0)


def is_retryable_provider_error(error: BaseException) -> bool:
    """Whether a failed request is retried at model level (anything in its chain retryable), and
    whether the judge's failure is transient for the daemon (`scorers.errors.JudgeError.retryable`).
    Missing or refused credentials never are (`is_terminal_auth_error`), whatever status
    litellm gave them.

    Example:
        >>> class Overloaded(Exception):
        ...     is_retryable = True
        >>> class InternalServerError(Exception):
        ...     status_code, is_retryable = 500, True
        >>> is_retryable_provider_error(Overloaded()), is_retryable_provider_error(ValueError())
        (True, False)
        >>> is_retryable_provider_error(InternalServerError("Missing credentials. Please pass an `api_key`"))
        False
    """
    if is_terminal_auth_error(error):
        return False
    return any(is_provider_retryable(level) for level in iter_error_chain(error))


def model_retry_delay_s(retry: int, error: BaseException) -> float:
    """Seconds to wait before model-level retry number ``retry`` (1-based) of ``error``.

    Example:
        >>> [model_retry_delay_s(n, ValueError()) for n in (1, 2, 3)]
        [1.0, 2.0, 4.0]
    """
    backoff = MODEL_RETRY_BASE_DELAY_S * 2 ** (retry - 1)
    hint_ms = parse_retry_after_ms(error)
    if hint_ms is None:
        return backoff
    return max(backoff, min(hint_ms, DEFAULT_MAX_RETRY_AFTER_MS) / 1000)
