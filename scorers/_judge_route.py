"""Where a judge request goes: litellm's provider resolution, request settings, prices.

litellm stays in charge of what it is good at: provider resolution
(``litellm.get_llm_provider``), request shaping (each provider's chat config:
``get_optional_params`` and ``transform_request``) and prices (``litellm.cost_per_token``,
computed once per judge execution). A `Route` is built once per (model, settings) pair
and cached; `scorers._judge_transport` sends requests along it.

``model_settings["max_retries"]`` and ``["num_retries"]`` never reach litellm (its own
retries stay at 0): ``max_retries`` is the judge's model-level retry count
(`scorers._judge_retry`). ``timeout`` bounds each HTTP attempt, `DEFAULT_JUDGE_TIMEOUT_S`
when unset (never litellm's own 6000 s default).

Invariant: this module imports litellm only inside functions (``litellm_module()``).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any

from scorers._judge_types import JudgeUsage

DEFAULT_JUDGE_TIMEOUT_S = 120.0
"""Seconds one HTTP attempt of a judge call may take when ``model_settings`` sets no ``timeout``."""

FAST_PROVIDERS = frozenset({"openai", "hosted_vllm"})
_TRANSPORT_KEYS = frozenset(
    {"api_base", "base_url", "api_key", "timeout", "extra_headers", "organization"}
)
_IGNORED_KEYS = frozenset({"num_retries", "max_retries"})  # litellm's retries stay at 0

_litellm: Any = None
_original_acompletion: Any = None
_optional_param_names: frozenset[str] = frozenset()


def litellm_module() -> Any:
    """Import litellm on first use, with the local price map (no network at import).

    Also silences litellm's "Give Feedback" banner, which it prints to stdout on errors, and
    drops the handler litellm gives its loggers when the application configured logging
    (`_leave_logging_to_the_application`).

    Example:
        >>> litellm = litellm_module()
        >>> (litellm is litellm_module(), litellm.suppress_debug_info)
        (True, True)
    """
    global _litellm, _optional_param_names, _original_acompletion
    if _litellm is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        litellm.suppress_debug_info = True
        _leave_logging_to_the_application()
        params = inspect.signature(litellm.get_optional_params).parameters
        _optional_param_names = frozenset(
            name for name, p in params.items()
            if p.kind is p.POSITIONAL_OR_KEYWORD or p.kind is p.KEYWORD_ONLY
        ) - {"model", "messages", "custom_llm_provider", "max_retries", "stream"}
        _original_acompletion = litellm.acompletion
        _litellm = litellm
    return _litellm


_LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")


def _leave_logging_to_the_application() -> None:
    """When the root logger has handlers (the application configured logging, as ``tracescore``
    does), remove the stream handler litellm adds to its loggers at import: their records also
    propagate to the root's handlers, so each litellm line was printed twice, once by litellm's
    handler on stdout (where ``tracescore score --format jsonl`` writes its rows). Without root
    handlers litellm's handler is the only one and stays."""
    if not logging.getLogger().handlers:
        return
    from litellm import _logging

    own = getattr(_logging, "handler", None)  # litellm's module-level LevelRoutingStreamHandler
    if own is None:
        return
    for name in _LITELLM_LOGGERS:
        logging.getLogger(name).removeHandler(own)


def acompletion_replaced() -> bool:
    """True when something replaced ``litellm.acompletion`` (a test's mock, a proxy wrapper).

    Judge calls then all go through it, so what SPEC promises ("all judge calls go through
    ``litellm.acompletion``") holds for whoever patched it.

    Example:
        >>> litellm = litellm_module()
        >>> acompletion_replaced()
        False
        >>> saved, litellm.acompletion = litellm.acompletion, lambda **kw: None
        >>> acompletion_replaced()
        True
        >>> litellm.acompletion = saved
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

    def unit_prices(self) -> tuple[float, float] | None:
        """USD per (input, output) token from litellm's price map, None when litellm does
        not know the model (a tiered price: the price of the first million tokens)."""
        if not self._cost_known:
            return None
        if not self._linear_checked:
            self._linear_checked = True
            self._unit_prices = self._linear_prices()
        if self._unit_prices is not None:
            return self._unit_prices[0], self._unit_prices[1]
        try:
            million = 1_000_000
            return self._litellm_cost(million, 0, 0) / million, self._litellm_cost(0, million, 0) / million
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
    route.timeout_s = float(timeout) if timeout is not None else None  # None: the default
    route.headers, route.gen_params, route.config, route.fast = headers, gen, config, True
    return route

