"""Executing a prompt step's judge call: processors, structured output, retries, telemetry.

``execute_judge_call(judge, prompt, output_schema=...)`` is the engine's single entry
point. One call is one *judge execution*; it makes one structured-output *attempt* (two
with the JSON fallback), each sending one or more *requests* to the model:

1. Input processors run once on ``[system: instructions, user: prompt]``. They change what
   is sent, not what is recorded: an execution's ``prompt`` is the step's prompt (what
   ``create_prompt`` returned), as in Mastra, even when a `PIIRedactor` rewrote it.
2. The schema is injected per ``json_prompt_injection`` (`scorers._structured_output`).
3. Each request takes a token of the model's requests-per-minute limit when one is set
   (`set_judge_rate_limit`), then holds the model's concurrency slot
   (`set_judge_concurrency`) only while it is in flight, and times out after
   ``model_settings["timeout"]`` (default 120 s). A retryable provider error (429, 5xx,
   timeout, connection error) is first retried ``model_settings["max_retries"]`` times
   with exponential backoff from 1 s (`scorers._judge_retry`); then it is offered to the
   error processors: the first `RetryDecision(retry=True)` sends the *same* request again
   after its delay, while ``judge.effective_max_processor_retries`` lasts (one budget per
   execution); once it is spent they are still asked, once, and a retry answer is ignored
   (Mastra's rule). Without error processors the failure is final at once. Missing or
   refused credentials (401, 403, "Missing credentials") are never retried and fail with
   `JudgeCredentialsError`, naming the variables the provider's key is read from.
4. The reply is parsed and validated. Keys the schema does not allow are dropped, not an
   error, as zod validates Mastra's judge output (`scorers._schema_keys`); the schema sent
   keeps its ``additionalProperties: false``. A parse or validation failure (never a
   provider error) is retried exactly once, keeping the chosen injection ("inline" stays
   inline, "system"/True stay system; "auto" and False fall back to system injection); a
   second failure raises `JudgeOutputError` quoting the reply's start.
5. Output processors run once, on the kept reply, after parsing (Mastra's order).

Every outcome is recorded as a `JudgeExecution` (attached to `JudgeError.execution` on
failure): usage summed over requests, cost computed once from that usage,
``attempt_count`` (structured-output attempts: 1, or 2 with the fallback) and
``model_call_count`` (model calls that returned a reply, whether or not it then parsed;
a request that failed is not one), as Mastra's ``attemptCount`` and ``modelCallCount``;
and ``request_count``, every request sent (failed ones and retries included), which the
judge metrics count.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from dataclasses import replace
from typing import Any

from pydantic import BaseModel

from scorers._judge_credentials import credentials_message
from scorers._judge_examples import system_message
from scorers._judge_governor import (
    JudgeGovernor,
    JudgeParked,
    JudgeRequest,
    credentials_digest,
    current_governor,
    max_output_tokens,
)
from scorers._judge_retry import is_retryable_provider_error, max_retries_of, model_retry_delay_s
from scorers._judge_transport import Reply, Route, ensure_litellm, route_for, send
from scorers._judge_types import Judge, JudgeExecution, JudgeUsage
from scorers._per_loop import PerLoop
from scorers._processors import JudgeReply, RetryDecision, is_terminal_auth_error
from scorers._rate_limit import judge_rate_limiter
from scorers._reply_memo import current_memo
from scorers._retry_after import parse_retry_after_ms
from scorers._structured_output import (
    Mode,
    OutputInvalid,
    SchemaSpec,
    ensure_jsonschema,
    inject,
    parse_reply,
    preview,
    resolve_mode,
)
from scorers.errors import JudgeCredentialsError, JudgeError, JudgeOutputError

logger = logging.getLogger(__name__)

DEFAULT_JUDGE_CONCURRENCY = 32
"""Judge requests in flight per model and event loop (SPEC ``[workers] judge_concurrency``)."""

_concurrency = DEFAULT_JUDGE_CONCURRENCY
_semaphores: PerLoop[asyncio.Semaphore] = PerLoop()


def set_judge_concurrency(limit: int) -> None:
    """Set how many judge requests may be in flight at once per model (per event loop).

    Applies to limits created afterwards: requests already waiting keep the old limit.

    Example:
        >>> set_judge_concurrency(8); get_judge_concurrency()
        8
        >>> set_judge_concurrency(DEFAULT_JUDGE_CONCURRENCY)
    """
    global _concurrency
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ValueError(f"judge concurrency must be a positive integer, not {limit!r}")
    _concurrency = limit
    _semaphores.clear()


def get_judge_concurrency() -> int:
    """The per-model judge concurrency limit in force.

    Example:
        >>> get_judge_concurrency() >= 1
        True
    """
    return _concurrency


def _semaphore(model: str) -> asyncio.Semaphore:
    return _semaphores.get(model, lambda: asyncio.Semaphore(_concurrency))


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class _ProviderFailure(Exception):
    """Internal: the provider request failed for good; ``error`` is litellm's mapped error."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class _Execution:
    """Mutable bookkeeping of one judge execution."""

    def __init__(self, judge: Judge, route: Route, prompt: str) -> None:
        self.judge = judge
        self.route = route
        self.prompt = prompt
        self.started = time.perf_counter()
        self.attempts = 0
        self.requests = 0  # sent, failed ones included
        self.model_calls = 0  # that returned a reply
        self.processor_retries = 0
        self.max_retries = max_retries_of(judge.model_settings)
        self.input_tokens = 0
        self.output_tokens = 0
        self.total_tokens = 0
        self.reasoning_tokens: int | None = None
        self.cached_tokens: int | None = None
        self.raw_output: str | None = None
        self.output_schema: dict[str, Any] | None = None  # the attempt's JSON schema (a governor's estimate)

    def add_usage(self, usage: JudgeUsage) -> None:
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.total_tokens += usage.total_tokens
        if usage.reasoning_tokens is not None:
            self.reasoning_tokens = (self.reasoning_tokens or 0) + usage.reasoning_tokens
        if usage.cached_input_tokens is not None:
            self.cached_tokens = (self.cached_tokens or 0) + usage.cached_input_tokens

    def record(self, status: str, output: Any = None, error: dict[str, Any] | None = None) -> JudgeExecution:
        usage = JudgeUsage(
            input_tokens=self.input_tokens, output_tokens=self.output_tokens,
            total_tokens=self.total_tokens, reasoning_tokens=self.reasoning_tokens,
            cached_input_tokens=self.cached_tokens,
        )
        return JudgeExecution(
            status=status,  # type: ignore[arg-type]
            prompt=self.prompt,
            output=output,
            raw_output=self.raw_output,
            model=self.route.model,
            provider=self.route.provider,
            usage=usage,
            cost_usd=self.route.cost_usd(usage),
            attempt_count=self.attempts,
            model_call_count=self.model_calls,
            request_count=self.requests,
            duration_ms=int((time.perf_counter() - self.started) * 1000),
            error=error,
        )

    async def request(self, messages: list[dict[str, Any]], response_format: dict[str, Any] | None,
                      format_key: str) -> Reply:
        """One request, re-sent while an error processor asks for it and the budget lasts.

        As in Mastra's agent loop, the error processors are asked about every failed
        request, the last one included: once the budget is spent they are still called
        (``retry_count`` equal to the budget) and a retry answer is ignored.
        """
        judge = self.judge
        budget = judge.effective_max_processor_retries
        while True:
            try:
                reply = await self._send_with_model_retries(messages, response_format, format_key)
            except JudgeParked:
                raise  # not the provider's failure: no retry, no error processor
            except Exception as exc:
                decision = await self._ask_error_processors(exc) if judge.error_processors else None
                if decision is None or not decision.retry or self.processor_retries >= budget:
                    raise _ProviderFailure(exc) from exc
                self.processor_retries += 1
                logger.warning(
                    "judge request to %s failed (%s); processor retry %d of %d in %.0f ms",
                    self.route.model, type(exc).__name__, self.processor_retries, budget,
                    decision.delay_ms,
                )
                if decision.delay_ms > 0:
                    await asyncio.sleep(decision.delay_ms / 1000)
                continue
            self.add_usage(reply.usage)
            self.raw_output = reply.text
            return reply

    async def _send_with_model_retries(self, messages: list[dict[str, Any]],
                                       response_format: dict[str, Any] | None, format_key: str) -> Reply:
        """Send, retrying retryable provider errors ``model_settings["max_retries"]`` times."""
        retries = 0
        while True:
            try:
                return await self._send(messages, response_format, format_key)
            except Exception as exc:
                if isinstance(exc, JudgeParked) or retries >= self.max_retries or not is_retryable_provider_error(exc):
                    raise
                retries += 1
                delay = model_retry_delay_s(retries, exc)
                logger.warning("judge request to %s failed (%s); model retry %d of %d in %.1f s",
                               self.route.model, type(exc).__name__, retries, self.max_retries, delay)
                await asyncio.sleep(delay)

    async def _send(self, messages: list[dict[str, Any]], response_format: dict[str, Any] | None,
                    format_key: str) -> Reply:
        """Exactly one HTTP request, counted as sent and, once it returns a reply, as a model
        call; within the rate limit and the concurrency slot; or, inside
        `remember_judge_replies`, the reply already paid for the same request (neither)."""
        memo = current_memo()
        key = memo.key_for(self.route.model, messages, response_format) if memo is not None else ""
        if memo is not None and (kept := await memo.recall(key)) is not None:
            return kept
        governed = current_governor()
        if governed is not None:
            reply = await self._send_governed(governed, messages, response_format, format_key)
        else:
            limiter = judge_rate_limiter(self.route.model)
            if limiter is not None:  # before the slot: waiting for the rate holds no slot
                await limiter.acquire()
            async with _semaphore(self.route.model):
                reply = await self._counted_send(self.route, messages, response_format, format_key)
        if memo is not None:
            await memo.keep(key, reply)
        return reply

    async def _send_governed(self, governed: tuple[JudgeGovernor, str | None], messages: list[dict[str, Any]],
                             response_format: dict[str, Any] | None, format_key: str) -> Reply:
        """`_send` under a deployment's governor: admitted (rate, budget, breaker) before the
        slot is taken, settled with the actual cost or the error after (SPEC §8)."""
        governor, scorer_id = governed
        route = self.route
        prices = route.unit_prices()
        request = JudgeRequest(
            route.model, credentials_digest(route.url, route.headers, route.settings), scorer_id,
            messages, self.output_schema, max_output_tokens=max_output_tokens(route.settings),
            input_price=None if prices is None else prices[0], output_price=None if prices is None else prices[1],
        )
        ticket = await governor.admit(request)
        if ticket.reply is not None:  # answered without the model (an estimate)
            await governor.settle(ticket, request, ticket.reply.usage, route.cost_usd(ticket.reply.usage), None)
            return ticket.reply
        try:
            async with _semaphore(route.model):
                reply = await self._counted_send(route, messages, response_format, format_key)
        except BaseException as exc:
            parked = await asyncio.shield(governor.settle(ticket, request, None, None, exc))
            if parked is not None:
                raise parked from exc
            raise
        await asyncio.shield(governor.settle(ticket, request, reply.usage, route.cost_usd(reply.usage), None))
        return reply

    async def _counted_send(self, route: Route, messages: list[dict[str, Any]],
                            response_format: dict[str, Any] | None, format_key: str) -> Reply:
        """`send`, counted: a request sent, and a model call only once the model replied (Mastra
        counts completed model steps: a request that failed for good or was retried is none)."""
        self.requests += 1
        reply = await send(route, messages, response_format, format_key)
        self.model_calls += 1
        return reply

    async def _ask_error_processors(self, exc: BaseException) -> RetryDecision | None:
        for processor in self.judge.error_processors or ():
            hook = getattr(processor, "process_api_error", None)
            if hook is None:
                continue
            decision = await _maybe_await(hook(exc, self.processor_retries))
            if isinstance(decision, RetryDecision) and decision.retry:
                return decision
            if isinstance(decision, dict) and decision.get("retry"):
                return RetryDecision(retry=True, delay_ms=float(decision.get("delay_ms") or 0))
        return None

    async def process_output(self, reply: Reply, value: Any, *, structured: bool) -> Any:
        """Run the output processors on the kept, parsed reply; returns the step's value."""
        processors = self.judge.output_processors
        if not processors:
            return value
        result = JudgeReply(text=reply.text, finish_reason=reply.finish_reason, usage=reply.usage,
                            model=self.route.model, object=value if structured else None)
        for processor in processors:
            hook = getattr(processor, "process_output_result", None)
            if hook is not None:
                returned = await _maybe_await(hook(result))
                # A processor may answer with the text alone; a reply without an object keeps
                # the parsed one (rewriting a structured reply's text never re-parses it).
                if isinstance(returned, str):
                    returned = replace(result, text=returned)
                elif structured and returned.object is None:
                    returned = replace(returned, object=result.object)
                result = returned
        return result.object if structured else result.text


def _error_dict(exc: BaseException, status_code: int | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
    if status_code is not None:
        error["status_code"] = status_code
    return error


def _to_json(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def fallback_mode(judge: Judge) -> Mode:
    """The injection of the one retry after a reply that does not parse or validate.

    ``fallback_json_prompt_injection`` when set; else the chosen injection is kept
    ("inline" stays inline, True / "system" stay system) and "auto" / False (native output)
    fall back to system injection.

    Example:
        >>> [fallback_mode(Judge(json_prompt_injection=m)) for m in ("inline", "system", True, "auto", False)]
        ['inline', 'system', 'system', 'system', 'system']
        >>> fallback_mode(Judge(json_prompt_injection="inline", fallback_json_prompt_injection="system"))
        'system'
    """
    chosen: Any = judge.fallback_json_prompt_injection
    if chosen is None:
        chosen = judge.json_prompt_injection
    return "inline" if chosen == "inline" else "system"


async def execute_judge_call(
    judge: Judge,
    prompt: str,
    *,
    output_schema: type[BaseModel] | dict[str, Any] | None,
) -> tuple[Any, JudgeExecution]:
    """Run one judge execution and return ``(value, execution)``.

    ``value`` is a validated model instance (pydantic schema), a validated dict (JSON
    Schema dict) or the reply text (no schema), after the output processors. ``judge`` is
    the step's merged judge with ``model`` and ``instructions`` set.

    Raises:
        JudgeOutputError: the reply did not parse or validate, twice.
        JudgeCredentialsError: the provider has no credentials or refused them (never retried).
        JudgeError: the provider failed for good (``retryable``, ``retry_after_s``,
            ``status_code`` set from the provider's error, which is chained), or a
            processor raised.

    Example:
        >>> judge = Judge(model="openai/gpt-4o-mini", instructions="You are a strict grader.",
        ...               model_settings={"api_base": "http://127.0.0.1:8000/v1", "api_key": "k"})
        >>> # value, execution = await execute_judge_call(judge, "Score this.", output_schema=None)
        >>> judge.effective_max_processor_retries
        0
    """
    if not judge.model or judge.instructions is None:
        raise ValueError("execute_judge_call needs a judge with a model and instructions")
    await ensure_litellm()
    try:
        route = route_for(judge.model, judge.model_settings)
    except Exception as exc:  # litellm cannot resolve the provider: nothing was sent
        status = getattr(exc, "status_code", None)
        status = status if isinstance(status, int) else None
        execution = JudgeExecution(status="failed", prompt=prompt, model=judge.model,
                                   error=_error_dict(exc, status))
        raise JudgeError(f"Judge model {judge.model!r} cannot be used: {exc}", status_code=status,
                         execution=execution) from exc
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_message(judge.instructions)},  # + few-shot examples in force
        {"role": "user", "content": prompt},
    ]
    state = _Execution(judge, route, prompt)
    try:
        for processor in judge.input_processors or ():
            hook = getattr(processor, "process_input", None)
            if hook is not None:
                messages = list(await _maybe_await(hook(messages)))
        if output_schema is None:
            state.attempts = 1
            reply = await state.request(messages, None, "")
            value = await state.process_output(reply, reply.text, structured=False)
            return value, state.record("success", output=value)
        await ensure_jsonschema()
        spec = SchemaSpec.of(output_schema)
        mode = resolve_mode(judge.json_prompt_injection, route.supports_native)
        try:
            value, reply = await _structured_attempt(state, messages, spec, mode)
        except OutputInvalid as invalid:
            fallback = fallback_mode(judge)
            logger.warning("judge reply from %s did not match the schema (%s); retrying once "
                           "with %s schema injection", route.model, str(invalid).splitlines()[0],
                           fallback)
            value, reply = await _structured_attempt(state, messages, spec, fallback, last=True)
        value = await state.process_output(reply, value, structured=True)
        return value, state.record("success", output=_to_json(value))
    except _ProviderFailure as failure:
        error = failure.error
        status = getattr(error, "status_code", None)
        status = status if isinstance(status, int) else None
        retry_after = parse_retry_after_ms(error)
        execution = state.record("failed", error=_error_dict(error, status))
        if is_terminal_auth_error(error):  # the judge's configuration, not a transient failure
            message, missing = credentials_message(route.model, judge.model_settings, error)
            raise JudgeCredentialsError(message, missing_env=missing, status_code=status,
                                        execution=execution) from error
        raise JudgeError(
            f"Judge call to {route.model} failed: {error}",
            retryable=is_retryable_provider_error(error),
            retry_after_s=retry_after / 1000 if retry_after is not None else None,
            status_code=status,
            execution=execution,
        ) from error
    except JudgeError:  # JudgeOutputError, already recorded
        raise
    except Exception as exc:
        execution = state.record("failed", error=_error_dict(exc))
        raise JudgeError(f"Judge call to {route.model} failed: {type(exc).__name__}: {exc}",
                         execution=execution) from exc


async def _structured_attempt(state: _Execution, messages: list[dict[str, Any]], spec: SchemaSpec,
                              mode: Mode, *, last: bool = False) -> tuple[Any, Reply]:
    """One structured-output attempt: request (with its retries), parse, validate."""
    route = state.route
    state.attempts += 1
    state.output_schema = spec.json_schema
    response_format = spec.response_format(strict=route.openai_style) if mode == "native" else None
    format_key = f"{spec.compact}\x00{route.openai_style}" if response_format else ""
    reply = await state.request(inject(messages, spec, mode), response_format, format_key)
    try:
        return parse_reply(reply.text, spec, native=mode == "native"), reply
    except OutputInvalid as invalid:
        if not last:
            raise
        message = (f"Judge output is not valid for the step's schema after {state.attempts} "
                   f"attempts: {invalid}. Reply started with: {preview(reply.text)}")
        execution = state.record("failed", error={"type": "JudgeOutputError", "message": message})
        raise JudgeOutputError(message, raw_output=reply.text[:2000], execution=execution) from invalid
