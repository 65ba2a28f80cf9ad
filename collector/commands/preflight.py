"""What ``check`` and ``serve`` refuse before anything runs, beyond what loading the
configuration checks: mistakes that pass every type and shape, then fail each job or each
export at run time.

- A judge model without a provider prefix (``llama3.1`` for ``ollama/llama3.1``) that litellm
  cannot place: every judge call of its scorer fails, so every job would be dead-lettered.
  One litellm places by its name (``gpt-4o-mini``, taken for ``openai``) works, and is only
  warned about by ``check``, with the prefixed name to write.
- An export endpoint that does not speak gRPC while ``[export] protocol`` is ``grpc`` (the
  default): a backend's OTLP/HTTP port (`collector.config.protocol_probe`). Only what the
  endpoint answers counts: one that cannot be reached now is not an error.

litellm is imported only when a judge model has no prefix.
"""

from __future__ import annotations

from typing import Any

from collector.config import Config
from collector.work.registry import RegisteredScorer

__all__ = ["export_protocol_problem", "judge_prefix_problems", "preflight_errors", "scorer_judges"]

_PREFIXES = ("openai/", "ollama/", "hosted_vllm/")
"""The prefixes suggested for a model litellm cannot place: an OpenAI-compatible server at
``api_base`` (a gateway, LM Studio, llama.cpp), Ollama, vLLM."""


def scorer_judges(entries: list[RegisteredScorer]) -> list[tuple[RegisteredScorer, Any]]:
    """Each (scorer, judge) pair of the scorers with prompt steps, their steps' judges included.

    Example:
        >>> scorer_judges([])
        []
    """
    return [(entry, judge) for entry in entries
            if entry.has_prompt_step and callable(getattr(entry.scorer, "get_judges", None))
            for judge in entry.scorer.get_judges()]


def _provider_of(model: str, settings: dict[str, Any]) -> str | None:
    """The provider litellm routes ``model`` to without a prefix, or None when it cannot tell."""
    from scorers._judge_route import litellm_module

    try:
        return str(litellm_module().get_llm_provider(
            model=model, api_base=settings.get("api_base") or settings.get("base_url"))[1])
    except Exception:  # litellm's BadRequestError: "LLM Provider NOT provided"
        return None


def judge_prefix_problems(entries: list[RegisteredScorer]) -> tuple[list[str], list[str]]:
    """The judge models written without a provider prefix (``openai/``, ``anthropic/``...):
    as errors, those litellm cannot place (each call would fail); as warnings, those it places
    by their name, with the prefixed name to write. A judge whose ``model_settings`` name
    ``custom_llm_provider`` needs no prefix.

    Example:
        >>> from scorers import Judge, create_scorer
        >>> from collector.config import ScorerConfig
        >>> def judged(model):
        ...     scorer = create_scorer(id=model, description="d", judge=Judge(model=model)).generate_score(
        ...         description="s", create_prompt=lambda run: "Score it.")
        ...     return RegisteredScorer(scorer, ScorerConfig(ref="m:s"))
        >>> errors, warnings = judge_prefix_problems([judged(m) for m in ("openai/gpt-4o-mini", "gpt-4o-mini", "llama3.1")])
        >>> warnings
        ["scorer gpt-4o-mini: judge model 'gpt-4o-mini' has no provider prefix (litellm takes it for openai); write 'openai/gpt-4o-mini'"]
        >>> print(errors[0])
        scorer llama3.1: judge model 'llama3.1' has no provider prefix and litellm cannot tell its provider: every judge call would fail and every job be dead-lettered; write 'openai/llama3.1' (an OpenAI-compatible server at model_settings api_base), 'ollama/llama3.1' or 'hosted_vllm/llama3.1', or another litellm provider's prefix
    """
    errors: list[str] = []
    warnings: list[str] = []
    for entry, judge in scorer_judges(entries):
        model, settings = judge.model, dict(judge.model_settings or {})
        if not model or "/" in model or settings.get("custom_llm_provider"):
            continue
        provider = _provider_of(model, settings)
        where = f"scorer {entry.scorer_id}: judge model {model!r} has no provider prefix"
        if provider is None:
            written = ", ".join(repr(prefix + model) for prefix in _PREFIXES[1:])
            text = (f"{where} and litellm cannot tell its provider: every judge call would fail and every job be "
                    f"dead-lettered; write {_PREFIXES[0] + model!r} (an OpenAI-compatible server at model_settings "
                    f"api_base), {written.replace(', ', ' or ')}, or another litellm provider's prefix")
            found = errors
        else:
            text = f"{where} (litellm takes it for {provider}); write {f'{provider}/{model}'!r}"
            found = warnings
        if text not in found:
            found.append(text)
    return errors, warnings


def export_protocol_problem(config: Config) -> str | None:
    """What the export endpoint's answer says is wrong with ``[export] protocol``, named by key
    (`collector.config.protocol_probe.grpc_endpoint_problem`); None when nothing is.

    Example:
        >>> export_protocol_problem(Config()) is None  # no export endpoint: nothing to ask
        True
    """
    export = config.export
    if not export.endpoint or export.protocol != "grpc":
        return None
    from collector.config.protocol_probe import grpc_endpoint_problem

    problem = grpc_endpoint_problem(export.endpoint, export.protocol)
    return None if problem is None else f"export.endpoint: {problem}"


def preflight_errors(config: Config, entries: list[RegisteredScorer]) -> list[str]:
    """Everything above that would fail at run time: judge models litellm cannot place, then an
    export endpoint that does not speak the configured protocol.

    Example:
        >>> preflight_errors(Config(), [])
        []
    """
    errors, _ = judge_prefix_problems(entries)
    export = export_protocol_problem(config)
    return errors + ([export] if export else [])
