"""The hook through which a deployment governs judge spend and rate (SPEC §8).

The scorer engine knows how to call a judge; it does not know the deployment's budgets,
shared rate limits or circuit breakers. Inside `govern_judge_calls(governor, scorer_id)`,
every judge request is first offered to the governor as a `JudgeRequest` (model,
credentials digest, scorer, prompt tokens, the call's output cap and the model's prices:
never the key), and settled with it afterwards:

* ``admit(request)`` waits for the shared rate, reserves the worst-case cost against every
  budget the call falls under, and returns a ticket; or raises `JudgeParked` (a budget is
  spent, or the model's breaker is open): the call is not made, the job is parked, not
  failed. A governor that answers for the model (an estimate: nothing is sent) returns a
  ticket whose ``reply`` is set.
* ``settle(ticket, usage, cost_usd, error)`` replaces the reservation by the actual cost,
  or learns from the error (a 401 opens the breaker, a 429's Retry-After cools the model);
  it may answer a `JudgeParked` that replaces the error (the job is parked, not failed).

Without a governor, each process keeps its own per-model rate limit
(`scorers._rate_limit`), as before.
"""

from __future__ import annotations

import hashlib
import re
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from scorers._judge_transport import Reply
from scorers._judge_types import JudgeUsage
from scorers._var_block import VarBlock
from scorers.errors import JudgeError

ParkReason = Literal["budget_exhausted", "judge_unavailable"]


class JudgeParked(JudgeError):
    """A judge call the deployment did not allow: a budget it would cross is spent
    (``budget_exhausted``), or its model's circuit breaker is open (``judge_unavailable``).

    Not a failure of the scorer: the job waits (``retry_after_s``: when asking again may
    succeed) with its attempts untouched.

    Example:
        >>> parked = JudgeParked("budget_exhausted", "daily budget of 0.05 USD spent", 3600.0)
        >>> parked.reason, parked.retry_after_s, parked.retryable
        ('budget_exhausted', 3600.0, False)
    """

    def __init__(self, reason: ParkReason, message: str, retry_after_s: float) -> None:
        super().__init__(message, retryable=False, retry_after_s=retry_after_s)
        self.reason: ParkReason = reason


def credentials_digest(url: str, headers: dict[str, str], settings: dict[str, Any]) -> str:
    """A short digest naming the credentials a judge request uses, never the key itself: a
    breaker opened by a revoked key is the breaker of that (model, key), and a new key
    starts closed.

    Example:
        >>> a = credentials_digest("http://h/v1", {"Authorization": "Bearer k1"}, {})
        >>> a == credentials_digest("http://h/v1", {"Authorization": "Bearer k2"}, {}), len(a)
        (False, 12)
    """
    material = "\x00".join((url, headers.get("Authorization", ""), str(settings.get("api_key") or ""),
                            str(settings.get("api_base") or settings.get("base_url") or "")))
    return hashlib.sha256(material.encode("utf-8", "replace")).hexdigest()[:12]


def max_output_tokens(settings: dict[str, Any] | None) -> int | None:
    """The output cap the call sends (``max_tokens`` or ``max_completion_tokens``), or None.

    Example:
        >>> max_output_tokens({"max_tokens": 300}), max_output_tokens({"temperature": 0}) is None
        (300, True)
    """
    for name in ("max_completion_tokens", "max_tokens"):
        value = (settings or {}).get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


@dataclass
class JudgeRequest:
    """One judge request as a governor sees it, before it is sent.

    ``input_price`` and ``output_price`` are USD per token (None: litellm has no price for
    the model). ``messages`` and ``output_schema`` are there for a governor that answers
    instead of the model (an estimate); a governor never logs them.

    Example:
        >>> r = JudgeRequest("openai/gpt-4o-mini", "c0ffee", "relevance", [], None,
        ...                  max_output_tokens=100, input_price=1e-6, output_price=2e-6)
        >>> r.prompt_tokens = 1000  # counted lazily with litellm's tokenizer when asked
        >>> round(r.worst_case_usd(default_output_tokens=1024), 6)
        0.0012
    """

    model: str
    credentials: str
    scorer_id: str | None
    messages: list[dict[str, Any]] = field(repr=False)
    output_schema: dict[str, Any] | None = field(repr=False)
    max_output_tokens: int | None = None
    input_price: float | None = None
    output_price: float | None = None
    _prompt_tokens: int | None = field(default=None, repr=False)

    @property
    def priced(self) -> bool:
        """Whether litellm knows the model's price."""
        return self.input_price is not None and self.output_price is not None

    @property
    def prompt_tokens(self) -> int:
        """Tokens of the messages, by litellm's tokenizer for the model (counted once)."""
        if self._prompt_tokens is None:
            self._prompt_tokens = count_prompt_tokens(self.model, self.messages)
        return self._prompt_tokens

    @prompt_tokens.setter
    def prompt_tokens(self, value: int) -> None:
        self._prompt_tokens = value

    def output_cap(self, default_output_tokens: int) -> int:
        """The most output tokens the call can be billed for."""
        return self.max_output_tokens or default_output_tokens

    def worst_case_usd(self, default_output_tokens: int) -> float:
        """The most the call can cost: its prompt and its output cap at the model's price."""
        return (self.prompt_tokens * (self.input_price or 0.0)
                + self.output_cap(default_output_tokens) * (self.output_price or 0.0))


def count_prompt_tokens(model: str, messages: list[dict[str, Any]]) -> int:
    """Prompt tokens of ``messages`` for ``model`` (litellm's tokenizer; tiktoken's for
    OpenAI models, a default encoding for others). Costs CPU: asked only under a budget,
    a tokens-per-minute limit or an estimate."""
    from scorers._judge_route import litellm_module

    try:
        return int(litellm_module().token_counter(model=model, messages=messages))
    except Exception:  # a tokenizer litellm cannot load: about four characters a token
        return sum(len(str(m.get("content") or "")) for m in messages) // 4 + 4 * len(messages)


@dataclass
class JudgeTicket:
    """What `JudgeGovernor.admit` hands back: its own state, or a ``reply`` given instead of
    the model's (nothing is sent)."""

    state: Any = None
    reply: Reply | None = None


class JudgeGovernor(Protocol):
    """Governs judge calls (budgets, shared rates, breakers); see the module docstring."""

    async def admit(self, request: JudgeRequest) -> JudgeTicket:
        """Wait for the rate, reserve the call's worst case; raise `JudgeParked` to refuse it."""
        ...

    async def settle(self, ticket: JudgeTicket, request: JudgeRequest, usage: JudgeUsage | None,
                     cost_usd: float | None, error: BaseException | None) -> JudgeParked | None:
        """The call is over: count its actual cost, or learn from its error. A `JudgeParked`
        returned replaces the error (a 401 that opened the breaker parks the job, not fails it)."""
        ...


@dataclass(frozen=True)
class _Governed:
    governor: JudgeGovernor
    scorer_id: str | None


_current: ContextVar[_Governed | None] = ContextVar("tracescore_judge_governor", default=None)


def govern_judge_calls(governor: JudgeGovernor | None, scorer_id: str | None = None) -> VarBlock[_Governed | None]:
    """Within this block, every judge request of ``scorer_id``'s run goes through ``governor``
    (None: no governor, the per-process limits apply).

    Example:
        >>> class Counting:
        ...     async def admit(self, request): return JudgeTicket()
        ...     async def settle(self, ticket, request, usage, cost_usd, error): return None
        >>> with govern_judge_calls(Counting(), "relevance"):
        ...     current_governor()[1]
        'relevance'
        >>> current_governor() is None
        True
    """
    return VarBlock(_current, None if governor is None else _Governed(governor, scorer_id))


def current_governor() -> tuple[JudgeGovernor, str | None] | None:
    """The governor in force and the scorer it governs for, or None."""
    governed = _current.get()
    return None if governed is None else (governed.governor, governed.scorer_id)


_UNKNOWN_MODEL = re.compile(
    r"model[^.]{0,80}(?:not found|does not exist|not exist|unknown|not supported)|unknown model|no such model",
    re.IGNORECASE)
_NO_QUOTA = re.compile(r"insufficient[_ ]quota|exceeded your current quota|billing|payment required", re.IGNORECASE)


def unavailable_reason(error: BaseException) -> str | None:
    """Why a judge failure says the judge cannot be used until someone acts (SPEC §8: open the
    breaker), or None for any other failure: refused credentials (401, 403), no quota or
    payment (402, ``insufficient_quota``), an unknown model (404, "model not found"). The
    reason names the status and a short message, never a key. A key missing from this
    process's environment is not the judge's answer (nothing was sent): None, and the job
    fails at once, naming the variable to set.

    Example:
        >>> class AuthenticationError(Exception):
        ...     status_code = 401
        >>> unavailable_reason(AuthenticationError("Incorrect API key provided: sk-abc***"))
        '401 authentication refused'
        >>> class RateLimitError(Exception):
        ...     status_code = 429
        >>> unavailable_reason(RateLimitError("You exceeded your current quota")), unavailable_reason(RateLimitError("slow down"))
        ('429 insufficient quota', None)
        >>> class NotFoundError(Exception):
        ...     status_code = 404
        >>> unavailable_reason(NotFoundError("The model `gpt-9` does not exist"))
        '404 unknown model'
    """
    from scorers._processors import _MISSING_CREDENTIALS, is_terminal_auth_error
    from scorers._retry_after import iter_error_chain

    if isinstance(error, JudgeParked):
        return None
    status: int | None = None
    text = ""
    for level in iter_error_chain(error):
        code = getattr(level, "status_code", None)
        if status is None and isinstance(code, int) and not isinstance(code, bool):
            status = code
        text += " " + str(level)
    prefix = f"{status} " if status is not None else ""
    if _MISSING_CREDENTIALS.search(text):  # no key here: nothing was asked of the judge (a dead letter)
        return None
    if status == 402 or _NO_QUOTA.search(text):
        return prefix + "insufficient quota"
    if status == 404 or _UNKNOWN_MODEL.search(text):
        return prefix + "unknown model"
    if is_terminal_auth_error(error):
        return prefix + ("permission denied" if status == 403 else "authentication refused")
    return None


def parked_cause(err: BaseException) -> JudgeParked | None:
    """The `JudgeParked` (a judge call the governor refused) that ``err`` was raised from, if any:
    a scorer wraps its step's error, so the refusal is found down the cause chain.

    Example:
        >>> parked = JudgeParked("budget_exhausted", "--max-usd reached", 0.0)
        >>> from scorers.errors import ScorerRunError
        >>> run_error = ScorerRunError("q", "analyze", [], cause=parked)
        >>> parked_cause(run_error) is parked, parked_cause(ValueError("x")) is None
        (True, True)
    """
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, JudgeParked):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None
