"""How one judge request reaches the provider: routing, the HTTP call, error mapping, cost.

litellm stays in charge of what it is good at: provider resolution
(``litellm.get_llm_provider``), request shaping (each provider's chat config:
``get_optional_params`` and ``transform_request``), error mapping (``exception_type`` turns
an HTTP status into ``litellm.RateLimitError`` & co, exactly as ``litellm.acompletion``
does) and prices (``litellm.cost_per_token``, computed once per judge execution).

For OpenAI-compatible providers (``openai/``, ``hosted_vllm/``) whose settings litellm maps
to a plain chat-completions body, the request itself is sent through one shared aiohttp
session per event loop instead of ``litellm.acompletion``: that call costs ~9 ms of CPU
(logging, cost, response objects, a fresh SDK client) against ~0.5 ms for the HTTP
request. Every other provider, or setting, goes through ``litellm.acompletion``, and so
does every call once ``litellm.acompletion`` has been replaced (a mock in a test). Both
paths send exactly one HTTP request per attempt: litellm's ``num_retries`` and the
underlying client's ``max_retries`` are forced to 0 (retries are the error processors').

Invariant: this module imports litellm only inside functions (``litellm_module()``).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from scorers._judge_types import JudgeUsage

FAST_PROVIDERS = frozenset({"openai", "hosted_vllm"})
_TRANSPORT_KEYS = frozenset(
    {"api_base", "base_url", "api_key", "timeout", "extra_headers", "organization"}
)
_IGNORED_KEYS = frozenset({"num_retries", "max_retries"})  # forced to 0, see module doc

_litellm: Any = None
_original_acompletion: Any = None
_optional_param_names: frozenset[str] = frozenset()


def litellm_module() -> Any:
    """Import litellm on first use, with the local price map (no network at import).

    Also silences litellm's "Give Feedback" banner, which it prints to stdout on errors.

    Example:
        >>> callable(litellm_module)
        True
    """
    global _litellm, _optional_param_names, _original_acompletion
    if _litellm is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        litellm.suppress_debug_info = True
        params = inspect.signature(litellm.get_optional_params).parameters
        _optional_param_names = frozenset(
            name for name, p in params.items()
            if p.kind is p.POSITIONAL_OR_KEYWORD or p.kind is p.KEYWORD_ONLY
        ) - {"model", "messages", "custom_llm_provider", "max_retries", "stream"}
        _original_acompletion = litellm.acompletion
        _litellm = litellm
    return _litellm


def acompletion_replaced() -> bool:
    """True when something replaced ``litellm.acompletion`` (a test's mock, a proxy wrapper).

    Judge calls then all go through it, so what SPEC promises ("all judge calls go through
    ``litellm.acompletion``") holds for whoever patched it.

    Example:
        >>> acompletion_replaced() in (True, False)
        True
    """
    return _litellm is not None and _litellm.acompletion is not _original_acompletion


async def ensure_litellm() -> Any:
    """Import litellm in a worker thread on first use: the import takes seconds of CPU and
    must not block the event loop (other scorers' judge calls, receivers, exports).

    Example:
        >>> import asyncio
        >>> asyncio.run(ensure_litellm()).__name__
        'litellm'
    """
    if _litellm is not None:
        return _litellm
    return await asyncio.to_thread(litellm_module)


@dataclass(frozen=True)
class Reply:
    """A completed provider answer."""

    text: str
    finish_reason: str | None
    usage: JudgeUsage


@dataclass
class Route:
    """Where and how one (model, settings) pair is sent; built once and cached."""

    model: str
    model_name: str
    provider: str
    settings: dict[str, Any] = field(repr=False)  # may hold an api_key: never printed
    fast: bool = False
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict, repr=False)  # Authorization
    timeout_s: float | None = None
    gen_params: dict[str, Any] = field(default_factory=dict, repr=False)
    config: Any = None
    _native: bool | None = None
    _cost_known: bool = True
    _unit_prices: tuple[float, float, float] | None = None  # (input, output, cached input) per token
    _linear_checked: bool = False
    _client_timeout: Any = None
    _optional: dict[str, dict[str, Any]] = field(default_factory=dict)

    def supports_native(self) -> bool:
        """Whether litellm says the model supports ``response_format`` with a JSON schema."""
        if self._native is None:
            try:
                self._native = bool(
                    litellm_module().supports_response_schema(
                        model=self.model_name, custom_llm_provider=self.provider
                    )
                )
            except Exception:
                self._native = False
        return self._native

    @property
    def openai_style(self) -> bool:
        """OpenAI-style providers get a strict schema in native mode."""
        return self.provider.startswith("openai") or self.provider == "azure"

    def optional_params(self, response_format: dict[str, Any] | None, key: str) -> dict[str, Any]:
        cached = self._optional.get(key)
        if cached is None:
            extra = {"response_format": response_format} if response_format else {}
            cached = litellm_module().get_optional_params(
                model=self.model_name, custom_llm_provider=self.provider, **self.gen_params, **extra
            )
            cached.pop("max_retries", None)
            if len(self._optional) > 64:
                self._optional.clear()
            self._optional[key] = cached
        return cached

    def cost_usd(self, usage: JudgeUsage) -> float | None:
        """Price of ``usage`` from litellm's price map, None when litellm does not know the model.

        litellm's ``cost_per_token`` costs ~0.1 ms a call. When its own figures show the
        model's price is linear (no tiers: the price of a sample usage equals the sum of its
        per-token prices), the per-token prices are kept and multiplied instead.
        """
        if not self._cost_known or (usage.input_tokens == 0 and usage.output_tokens == 0):
            return None
        cached = usage.cached_input_tokens or 0
        if not self._linear_checked:
            self._linear_checked = True
            self._unit_prices = self._linear_prices()
        if self._unit_prices is not None:
            p_in, p_out, p_cached = self._unit_prices
            return (usage.input_tokens - cached) * p_in + cached * p_cached + usage.output_tokens * p_out
        try:
            return self._litellm_cost(usage.input_tokens, usage.output_tokens, cached)
        except Exception:
            self._cost_known = False
            return None

    def _litellm_cost(self, prompt: int, completion: int, cached: int) -> float:
        prompt_cost, completion_cost = litellm_module().cost_per_token(
            model=self.model_name, custom_llm_provider=self.provider, prompt_tokens=prompt,
            completion_tokens=completion, cache_read_input_tokens=cached,
        )
        return float(prompt_cost) + float(completion_cost)

    def _linear_prices(self) -> tuple[float, float, float] | None:
        """Per-token (input, output, cached input) prices, if litellm prices this model linearly."""
        try:
            million = 1_000_000
            p_in = self._litellm_cost(million, 0, 0) / million
            p_out = self._litellm_cost(0, million, 0) / million
            p_cached = self._litellm_cost(million, 0, million) / million
            samples = ((1234, 567, 89), (300_000, 40_000, 0), (2_000_000, 300_000, 0), (7, 1, 0))
            for prompt, completion, cached in samples:
                expected = self._litellm_cost(prompt, completion, cached)
                linear = (prompt - cached) * p_in + cached * p_cached + completion * p_out
                if abs(linear - expected) > 1e-9 * max(1.0, abs(expected)):
                    return None  # tiered or otherwise non-linear: ask litellm every time
        except Exception:
            return None
        return p_in, p_out, p_cached


_routes: dict[str, Route] = {}


def route_for(model: str, settings: dict[str, Any] | None) -> Route:
    """The cached `Route` for a model string and its ``model_settings``.

    Example:
        >>> route_for("openai/gpt-4o-mini", {"api_base": "http://127.0.0.1:9/v1", "api_key": "k"}).fast
        True
    """
    settings = dict(settings or {})
    key = model + "\x00" + json.dumps(settings, sort_keys=True, default=repr)
    route = _routes.get(key)
    if route is None:
        if len(_routes) > 1024:
            _routes.clear()
        route = _routes[key] = _build_route(model, settings)
    return route


def _build_route(model: str, settings: dict[str, Any]) -> Route:
    litellm = litellm_module()
    for name in _IGNORED_KEYS:
        settings.pop(name, None)
    api_base = settings.get("api_base") or settings.get("base_url")
    model_name, provider, dynamic_key, dynamic_base = litellm.get_llm_provider(
        model=model,
        custom_llm_provider=settings.get("custom_llm_provider"),
        api_base=api_base,
        api_key=settings.get("api_key"),
    )
    route = Route(model=model, model_name=model_name, provider=provider, settings=settings)
    gen = {k: v for k, v in settings.items() if k not in _TRANSPORT_KEYS and k != "custom_llm_provider"}
    if provider not in FAST_PROVIDERS or not set(gen) <= _optional_param_names:
        return route
    from litellm.llms.openai.chat.gpt_transformation import OpenAIGPTConfig
    from litellm.utils import ProviderConfigManager

    config = ProviderConfigManager.get_provider_chat_config(model_name, litellm.LlmProviders(provider))
    if not isinstance(config, OpenAIGPTConfig):
        return route
    env = os.environ
    if provider == "openai":
        base = (api_base or litellm.api_base or env.get("OPENAI_BASE_URL")
                or env.get("OPENAI_API_BASE") or "https://api.openai.com/v1")
        key = settings.get("api_key") or litellm.api_key or litellm.openai_key or env.get("OPENAI_API_KEY")
    else:
        base = dynamic_base or api_base
        key = settings.get("api_key") or dynamic_key
    if not base or not key:
        return route  # let litellm raise its own configuration error
    route.url = config.get_complete_url(
        api_base=base, api_key=key, model=model_name, optional_params={}, litellm_params={}, stream=False
    )
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    organization = settings.get("organization") or (
        env.get("OPENAI_ORGANIZATION") if provider == "openai" else None
    )
    if organization:
        headers["OpenAI-Organization"] = str(organization)
    headers.update({str(k): str(v) for k, v in (settings.get("extra_headers") or {}).items()})
    timeout = settings.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)):
        return route  # an httpx.Timeout or similar: litellm knows what to do with it
    route.timeout_s = float(timeout) if timeout is not None else float(litellm.request_timeout)
    route.headers, route.gen_params, route.config, route.fast = headers, gen, config, True
    return route


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

    Raises litellm's mapped exception on any provider or network failure.
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
    if route._client_timeout is None:
        route._client_timeout = aiohttp.ClientTimeout(total=route.timeout_s)
    session = await loop_clients().get_session()
    try:
        async with session.post(
            route.url, data=payload, headers=route.headers,
            timeout=route._client_timeout,
        ) as response:
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
    if response_format is not None:
        kwargs["response_format"] = response_format
    response = await litellm.acompletion(
        model=route.model, messages=messages, num_retries=0, max_retries=0, **kwargs
    )
    choice = response.choices[0]
    text = getattr(choice.message, "content", None) or ""
    return Reply(text=text, finish_reason=getattr(choice, "finish_reason", None),
                 usage=_usage(getattr(response, "usage", None)))
