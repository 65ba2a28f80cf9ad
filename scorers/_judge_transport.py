"""How one judge request reaches the provider: the HTTP call, its timeout, error mapping.

For OpenAI-compatible providers (``openai/``, ``hosted_vllm/``) whose settings litellm maps
to a plain chat-completions body (a "fast" `Route`), the request is sent through one
shared aiohttp session per event loop instead of ``litellm.acompletion``: that call costs
~9 ms of CPU (logging, cost, response objects, a fresh SDK client) against ~0.5 ms for the
HTTP request. Every other provider, or setting, goes through ``litellm.acompletion``, and
so does every call once ``litellm.acompletion`` has been replaced (a mock in a test). Both
paths send exactly one HTTP request per call of `send`, bounded by the route's timeout
(`DEFAULT_JUDGE_TIMEOUT_S` when unset); errors are mapped to litellm's exception types
(``exception_type``, as ``litellm.acompletion`` does), a timeout to ``litellm.Timeout``.
Retries are the caller's (`scorers._judge`).

Routing, prices and the lazy litellm import live in `scorers._judge_route` (re-exported
here). Invariant: this module imports litellm only inside functions.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from scorers import _judge_route
from scorers._judge_route import (
    Route,
    acompletion_replaced,
    ensure_litellm,
    litellm_module,
    route_for,
)
from scorers._judge_types import JudgeUsage

__all__ = [
    "Reply", "Route", "send", "route_for", "ensure_litellm", "litellm_module",
    "acompletion_replaced", "aclose_judge_clients", "loop_clients", "map_error",
]  # fmt: skip


@dataclass(frozen=True)
class Reply:
    """A completed provider answer."""

    text: str
    finish_reason: str | None
    usage: JudgeUsage


# --------------------------------------------------------------------------- per-loop clients


class _LoopClients:
    """The shared aiohttp session of one event loop, closed when the loop shuts down."""

    def __init__(self) -> None:
        self.session: Any = None
        self._keeper: Any = None

    async def get_session(self) -> Any:
        if self.session is None or self.session.closed:
            import aiohttp

            connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
            self.session = aiohttp.ClientSession(connector=connector, auto_decompress=True)
            # An async generator parked at its first yield is finalised by
            # loop.shutdown_asyncgens() (asyncio.run, pytest-asyncio): it closes the session.
            self._keeper = self._keep(self.session)
            await self._keeper.__anext__()
        return self.session

    @staticmethod
    async def _keep(session: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await session.close()

    async def aclose(self) -> None:
        if self.session is not None and not self.session.closed:
            await self.session.close()
        self.session = None


_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopClients] = (
    weakref.WeakKeyDictionary()
)


def loop_clients() -> _LoopClients:
    """The clients of the running event loop."""
    loop = asyncio.get_running_loop()
    clients = _clients.get(loop)
    if clients is None:
        clients = _clients[loop] = _LoopClients()
    return clients


async def aclose_judge_clients() -> None:
    """Close the judge's shared HTTP session of the running event loop (it reopens on demand).

    Example:
        >>> import asyncio
        >>> asyncio.run(aclose_judge_clients())
    """
    clients = _clients.get(asyncio.get_running_loop())
    if clients is not None:
        await clients.aclose()


# --------------------------------------------------------------------------- sending


def _usage(raw: Any) -> JudgeUsage:
    if raw is None:
        return JudgeUsage()
    get = raw.get if isinstance(raw, dict) else (lambda k, d=None: getattr(raw, k, d))
    details_out = get("completion_tokens_details")
    details_in = get("prompt_tokens_details")

    def _detail(obj: Any, key: str) -> int | None:
        if obj is None:
            return None
        value = obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)
        return int(value) if isinstance(value, int) else None

    return JudgeUsage(
        input_tokens=int(get("prompt_tokens") or 0),
        output_tokens=int(get("completion_tokens") or 0),
        total_tokens=int(get("total_tokens") or 0),
        reasoning_tokens=_detail(details_out, "reasoning_tokens"),
        cached_input_tokens=_detail(details_in, "cached_tokens"),
    )


def map_error(route: Route, original: BaseException) -> BaseException:
    """Map a provider error to litellm's exception types (as ``litellm.acompletion`` would)."""
    from litellm.litellm_core_utils.exception_mapping_utils import exception_type

    try:
        mapped = exception_type(
            model=route.model_name, original_exception=original, custom_llm_provider=route.provider
        )
    except Exception as raised:
        mapped = raised
    if mapped is not original and mapped.__cause__ is None:
        mapped.__cause__ = original
    return mapped


def _http_error(route: Route, status: int, headers: Any, raw: bytes) -> BaseException:
    import httpx
    from litellm.llms.openai.common_utils import OpenAIError

    text = raw.decode("utf-8", "replace")
    body: Any = None
    message = text[:2000] or f"Error code: {status}"
    try:
        body = json.loads(text)
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict) and error.get("message"):
            message = str(error["message"])
        elif isinstance(error, str):
            message = error
    except ValueError:
        body = None
    request = httpx.Request("POST", route.url)
    hdrs = httpx.Headers(list(headers.items()))
    response = httpx.Response(status, headers=hdrs, content=raw, request=request)
    original = OpenAIError(
        status_code=status, message=message, headers=hdrs, request=request, response=response,
        body=body if isinstance(body, dict) else None,
    )
    return map_error(route, original)


def _transport_error(route: Route, exc: BaseException) -> BaseException:
    from litellm.llms.openai.common_utils import OpenAIError

    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        original = OpenAIError(status_code=408, message="Request timed out.")
    else:
        original = OpenAIError(status_code=500, message=f"Connection error. {type(exc).__name__}: {exc}")
    original.__cause__ = exc
    return map_error(route, original)


async def send(route: Route, messages: list[dict[str, Any]],
               response_format: dict[str, Any] | None, format_key: str) -> Reply:
    """Send one chat-completions request (exactly one HTTP request) and return the reply.

    The request times out after ``model_settings["timeout"]`` seconds, or
    `DEFAULT_JUDGE_TIMEOUT_S`. Raises litellm's mapped exception on any provider or network
    failure (``litellm.Timeout`` for a timeout).
    """
    if not route.fast or acompletion_replaced():
        return await _send_litellm(route, messages, response_format)
    import aiohttp

    params = route.optional_params(response_format, format_key)
    body = route.config.transform_request(route.model_name, messages, dict(params), {}, {})
    if body.get("stream") is False:
        del body["stream"]
    extra_body = body.pop("extra_body", None)
    if extra_body:
        body.update(extra_body)
    payload = json.dumps(body).encode()
    timeout = aiohttp.ClientTimeout(total=route.timeout_s or _judge_route.DEFAULT_JUDGE_TIMEOUT_S)
    session = await loop_clients().get_session()
    try:
        async with session.post(route.url, data=payload, headers=route.headers,
                                timeout=timeout) as response:
            raw = await response.read()
            status = response.status
            headers = response.headers
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        # Chain: litellm error -> OpenAIError -> the aiohttp/OS error (set in _transport_error).
        mapped = _transport_error(route, exc)
        raise mapped  # noqa: B904
    if status >= 400:
        raise _http_error(route, status, headers, raw)
    try:
        data = json.loads(raw)
        choice = data["choices"][0]
        text = choice["message"].get("content") or ""
        finish = choice.get("finish_reason")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise _http_error(route, 500, headers, b"Invalid chat completion response: " + raw[:500]) from exc
    return Reply(text=text, finish_reason=finish, usage=_usage(data.get("usage")))


async def _send_litellm(route: Route, messages: list[dict[str, Any]],
                        response_format: dict[str, Any] | None) -> Reply:
    litellm = litellm_module()
    kwargs = dict(route.settings)
    if kwargs.get("timeout") is None:  # litellm's own default is 6000 s
        kwargs["timeout"] = _judge_route.DEFAULT_JUDGE_TIMEOUT_S
    if response_format is not None:
        kwargs["response_format"] = response_format
    response = await litellm.acompletion(
        model=route.model, messages=messages, num_retries=0, max_retries=0, **kwargs
    )
    choice = response.choices[0]
    text = getattr(choice.message, "content", None) or ""
    return Reply(text=text, finish_reason=getattr(choice, "finish_reason", None),
                 usage=_usage(getattr(response, "usage", None)))
