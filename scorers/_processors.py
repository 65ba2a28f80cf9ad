"""Judge processors: implementation (public names are re-exported by `scorers.processors`)."""

from __future__ import annotations

import errno
import inspect
import math
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from scorers._judge_types import JudgeUsage
from scorers._retry_after import DEFAULT_MAX_RETRY_AFTER_MS, iter_error_chain, parse_retry_after_ms

Messages = list[dict[str, Any]]


@dataclass(frozen=True)
class RetryDecision:
    """An error processor's answer: retry the failed request (after ``delay_ms``) or not.

    Example:
        >>> RetryDecision(delay_ms=250)
        RetryDecision(retry=True, delay_ms=250)
    """

    retry: bool = True
    delay_ms: float = 0


@dataclass(frozen=True)
class JudgeReply:
    """One reply of the judge model, as output processors see it (after it was parsed).

    ``text`` is the reply's text; ``object`` the parsed and validated result of a
    structured step (a model instance or a dict; None for a plain-text generate_reason).
    A processor returns a reply (``dataclasses.replace(result, text=...)``) or just the
    text: a new ``text`` becomes a plain-text step's value, a new ``object`` a structured
    step's value; rewriting the text of a structured reply never re-parses it.

    Example:
        >>> JudgeReply(text='{"score": 1}', finish_reason="stop", object={"score": 1}).object
        {'score': 1}
    """

    text: str
    finish_reason: str | None = None
    usage: JudgeUsage = field(default_factory=JudgeUsage)
    model: str | None = None
    object: Any = None


@runtime_checkable
class InputProcessor(Protocol):
    """Rewrites the judge's messages once, before the first request.

    Example:
        >>> from scorers.processors import PIIRedactor
        >>> isinstance(PIIRedactor(), InputProcessor)
        True
    """

    def process_input(self, messages: Messages) -> Messages | Awaitable[Messages]:
        """Return the messages to send."""
        ...


@runtime_checkable
class OutputProcessor(Protocol):
    """Rewrites a judge execution's result after it was parsed and validated (Mastra's order).

    Example:
        >>> from dataclasses import replace
        >>> class Upper:
        ...     def process_output_result(self, result):
        ...         return replace(result, text=result.text.upper())
        >>> isinstance(Upper(), OutputProcessor)
        True
        >>> Upper().process_output_result(JudgeReply(text="fine", object={"score": 1}))
        JudgeReply(text='FINE', finish_reason=None, usage=JudgeUsage(input_tokens=0, output_tokens=0, total_tokens=0, reasoning_tokens=None, cached_input_tokens=None), model=None, object={'score': 1})
    """

    def process_output_result(self, result: JudgeReply) -> JudgeReply | str | Awaitable[JudgeReply | str]:
        """Return the result (or just its text) the step keeps."""
        ...


@runtime_checkable
class ErrorProcessor(Protocol):
    """Decides whether a failed judge request is sent again.

    Example:
        >>> isinstance(StreamErrorRetryProcessor(), ErrorProcessor)
        True
    """

    def process_api_error(
        self, error: BaseException, retry_count: int
    ) -> RetryDecision | None | Awaitable[RetryDecision | None]:
        """Return ``RetryDecision(retry=True, ...)`` to retry, None to pass."""
        ...


# --------------------------------------------------------------------------- matchers

_TERMINAL_CODES = frozenset(
    {"access_denied", "authentication_error", "forbidden", "invalid_api_key", "permission_denied"}
)
_OPENAI_RETRYABLE_CODES = (
    "rate_limit", "server_error", "internal_error", "timeout", "temporarily_unavailable",
    "service_unavailable", "overloaded",
)
_CAN_RETRY = re.compile(r"you can retry your request", re.IGNORECASE)
_RESET = re.compile(r"econnreset|socket hang up|connection reset|server disconnected", re.IGNORECASE)
_MISSING_CREDENTIALS = re.compile(r"\bmissing (?:[\w.-]+ )?(?:api[ _-]?key|credentials)\b", re.IGNORECASE)
"""The provider SDK found no key before sending anything: the OpenAI SDK's "Missing credentials"
(litellm maps it to a retryable 500), litellm's "Missing Gemini API key"."""
_AUTH_ERROR_NAMES = frozenset({"AuthenticationError", "PermissionDeniedError"})


def _status(level: Any) -> int | None:
    for attr in ("status_code", "statusCode", "status"):
        value = getattr(level, attr, None) if not isinstance(level, dict) else level.get(attr)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _payloads(level: Any) -> list[dict[str, Any]]:
    """Dict payloads an error carries (body, data, error), and their nested "error"."""
    found: list[dict[str, Any]] = []
    for attr in ("body", "data", "error", "response_body", "responseBody"):
        value = getattr(level, attr, None)
        if isinstance(value, dict):
            found.append(value)
            if isinstance(value.get("error"), dict):
                found.append(value["error"])
    return found


def is_terminal_auth_error(error: BaseException | Any) -> bool:
    """True when anything in the error's chain says 401/403, an auth/permission code, is an
    authentication error, or says the credentials are missing (whatever status litellm gave it:
    it maps the OpenAI SDK's "Missing credentials" to a 500).

    Such errors are never retried: not by `StreamErrorRetryProcessor`, not as a retryable
    provider error (`scorers._judge_retry`), not by the daemon as a transient failure.

    Example:
        >>> class Denied(Exception):
        ...     status_code = 403
        >>> is_terminal_auth_error(RuntimeError("x")), is_terminal_auth_error(Denied())
        (False, True)
        >>> class InternalServerError(Exception):
        ...     status_code = 500
        >>> is_terminal_auth_error(InternalServerError("OpenAIException - Missing credentials. Please pass an `api_key`"))
        True
    """
    for level in iter_error_chain(error):
        if type(level).__name__ in _AUTH_ERROR_NAMES or _MISSING_CREDENTIALS.search(str(level)):
            return True
        for item in [level, *_payloads(level)]:
            if _status(item) in (401, 403):
                return True
            for key in ("code", "type"):
                value = item.get(key) if isinstance(item, dict) else getattr(item, key, None)
                if isinstance(value, str) and value.lower() in _TERMINAL_CODES:
                    return True
    return False


def is_provider_retryable(level: Any) -> bool:
    """Whether one error object (not its chain) is retryable by the provider's own account.

    True for an object with ``is_retryable``/``isRetryable`` set to True, and for litellm's
    (and the OpenAI SDK's) errors with a retryable status: 408, 409, 429 and 5xx, which
    covers timeouts and connection errors as litellm maps them.

    Example:
        >>> class RateLimitError(Exception):
        ...     __module__ = "litellm.exceptions"
        ...     status_code = 429
        >>> is_provider_retryable(RateLimitError()), is_provider_retryable(ValueError())
        (True, False)
    """
    for attr in ("is_retryable", "isRetryable"):
        if getattr(level, attr, None) is True:
            return True
    module = type(level).__module__ or ""
    if module.split(".")[0] in ("litellm", "openai"):
        status = _status(level)
        if status is not None:
            return status in (408, 409, 429) or status >= 500
        name = type(level).__name__
        return name in ("Timeout", "APITimeoutError", "APIConnectionError")
    return False


def is_bad_request_error(error: BaseException | Any) -> bool:
    """Matcher: the error has HTTP status 400.

    Example:
        >>> class Bad(Exception):
        ...     status_code = 400
        >>> is_bad_request_error(Bad()), is_bad_request_error(ValueError())
        (True, False)
    """
    return _status(error) == 400


def is_connection_reset_error(error: BaseException | Any) -> bool:
    """Matcher: the connection was reset (ECONNRESET, "socket hang up", server disconnected).

    Example:
        >>> is_connection_reset_error(ConnectionResetError(104, "Connection reset by peer"))
        True
        >>> is_connection_reset_error(ValueError("bad value"))
        False
    """
    if isinstance(error, ConnectionResetError):
        return True
    if isinstance(error, OSError) and error.errno == errno.ECONNRESET:
        return True
    code = getattr(error, "code", None)
    if isinstance(code, str) and code.upper() == "ECONNRESET":
        return True
    if type(error).__name__ in ("ServerDisconnectedError", "RemoteProtocolError"):
        return True
    return bool(_RESET.search(str(error)))


def _openai_stream_error(level: Any) -> bool:
    """Mastra's built-in matcher for OpenAI Responses stream error payloads."""
    for payload in _payloads(level) + ([level] if isinstance(level, dict) else []):
        inner: Any = None
        if payload.get("type") == "error":
            inner = payload.get("error")
        elif payload.get("type") == "response.failed":
            inner = (payload.get("response") or {}).get("error")
        if not isinstance(inner, dict):
            continue
        code = str(inner.get("code") or inner.get("type") or "").lower()
        if any(marker in code for marker in _OPENAI_RETRYABLE_CODES):
            return True
        if _CAN_RETRY.search(str(inner.get("message") or "")):
            return True
    return False


# --------------------------------------------------------------------------- retry processor

DelayMs = float | Callable[[int], "float | Awaitable[float]"]


@dataclass(frozen=True)
class RetryMatcher:
    """A matcher with its own policy: when ``match`` claims the error first, these win.

    Example:
        >>> m = RetryMatcher(is_connection_reset_error, max_retries=2, delay_ms=lambda n: 100 * 2**n)
        >>> m.max_retries
        2
    """

    match: Callable[[Any], bool]
    max_retries: int | None = None
    delay_ms: DelayMs | None = None
    on_retry: Callable[[BaseException, int, float], Any] | None = None


_DEFAULT_POLICY = RetryMatcher(match=lambda _error: False)


def _clean_ms(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) and number > 0 else 0.0


class StreamErrorRetryProcessor:
    """Mastra's ``StreamErrorRetryProcessor``: retries transient provider errors.

    Decision for a failed request (``process_api_error``):

    1. Errors whose chain says 401/403 (or an auth/permission code) are never retried.
    2. Walk the error and its cause chain. At each level the matchers are tried in order
       (Mastra's OpenAI stream-error matcher first, then ``matchers``); the first that
       matches gives its policy. Only when no matcher matches anywhere in the chain does a
       provider-retryable error (litellm's 408, 409, 429, 5xx, timeouts, connection
       errors) give the default policy. Explicit matchers therefore outrank provider
       retryability. (Mastra compares the two level by level; litellm wraps a connection
       reset in a retryable 500 error, so a reset matcher would never be reached.)
    3. Nothing claimed it: the default policy if ``retry_unknown_errors``, else no retry.
    4. No retry once ``retry_count`` reaches the policy's ``max_retries``.
    5. The delay is ``max(delay_ms, min(Retry-After, max_retry_after_ms))``: the provider's
       ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date) can raise it, capped.

    Args:
        max_retries: retries allowed by this processor (compared with ``retry_count``).
        delay_ms: milliseconds to wait, or a function of ``retry_count`` (may be async).
            Negative or non-finite values become 0.
        max_retry_after_ms: cap on the provider's Retry-After hint (never on ``delay_ms``).
        matchers: predicates ``(error) -> bool`` or `RetryMatcher` policies.
        retry_unknown_errors: also retry errors nothing claims (except auth errors).

    Example:
        >>> p = StreamErrorRetryProcessor(max_retries=2, delay_ms=lambda n: 50 * (n + 1))
        >>> class Overloaded(Exception):
        ...     status_code = 529
        ...     is_retryable = True
        >>> import asyncio
        >>> asyncio.run(p.process_api_error(Overloaded(), 1))
        RetryDecision(retry=True, delay_ms=100.0)
        >>> asyncio.run(p.process_api_error(Overloaded(), 2)) is None
        True
    """

    def __init__(
        self,
        max_retries: int = 1,
        delay_ms: DelayMs = 0,
        max_retry_after_ms: float = DEFAULT_MAX_RETRY_AFTER_MS,
        matchers: Sequence[Callable[[Any], bool] | RetryMatcher] = (),
        retry_unknown_errors: bool = False,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.max_retries = max_retries
        self.delay_ms = delay_ms
        self.max_retry_after_ms = _clean_ms(max_retry_after_ms)
        self.matchers: tuple[RetryMatcher, ...] = tuple(
            m if isinstance(m, RetryMatcher) else RetryMatcher(match=m) for m in matchers
        )
        self.retry_unknown_errors = retry_unknown_errors

    def __repr__(self) -> str:
        return (
            f"StreamErrorRetryProcessor(max_retries={self.max_retries}, "
            f"matchers={len(self.matchers)}, retry_unknown_errors={self.retry_unknown_errors})"
        )

    def find_policy(self, error: BaseException | Any) -> RetryMatcher | None:
        """The policy that claims ``error`` (steps 1-3 above), or None.

        Example:
            >>> p = StreamErrorRetryProcessor(matchers=[is_connection_reset_error])
            >>> p.find_policy(ConnectionResetError()) is p.matchers[0]
            True
            >>> p.find_policy(ValueError("nope")) is None
            True
        """
        if is_terminal_auth_error(error):
            return None
        levels = list(iter_error_chain(error))
        builtin = RetryMatcher(match=_openai_stream_error)
        for level in levels:
            for matcher in (builtin, *self.matchers):
                try:
                    matched = bool(matcher.match(level))
                except Exception:  # a matcher that cannot read this level does not match
                    matched = False
                if matched:
                    return _DEFAULT_POLICY if matcher is builtin else matcher
        if any(is_provider_retryable(level) for level in levels):
            return _DEFAULT_POLICY
        return _DEFAULT_POLICY if self.retry_unknown_errors else None

    async def process_api_error(self, error: BaseException, retry_count: int) -> RetryDecision | None:
        """Decide whether the failed judge request is retried, and after how long.

        Example:
            >>> import asyncio
            >>> asyncio.run(StreamErrorRetryProcessor().process_api_error(ValueError("x"), 0)) is None
            True
        """
        policy = self.find_policy(error)
        if policy is None:
            return None
        limit = policy.max_retries if policy.max_retries is not None else self.max_retries
        if retry_count >= limit:
            return None
        configured = policy.delay_ms if policy.delay_ms is not None else self.delay_ms
        if callable(configured):
            value = configured(retry_count)
            if inspect.isawaitable(value):
                value = await value
            delay = _clean_ms(value)
        else:
            delay = _clean_ms(configured)
        hint = parse_retry_after_ms(error)
        if hint is not None:
            delay = max(delay, min(hint, self.max_retry_after_ms))
        if policy.on_retry is not None:
            result = policy.on_retry(error, retry_count, delay)
            if inspect.isawaitable(result):
                await result
        return RetryDecision(retry=True, delay_ms=delay)
