"""Which credentials a judge's provider needs, and what a failure for want of them says.

litellm knows which environment variables each provider reads its key from
(``litellm.validate_environment(model)``). A judge whose ``model_settings`` give an
``api_key``, or an ``api_base`` (a local server), needs none of them. `missing_env` answers
for ``tracescore check`` (which warns before the daemon starts) and for a judge call that
failed for want of credentials (`credentials_message`, the text of its
`scorers.errors.JudgeCredentialsError`). litellm is imported only when asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scorers._judge_route import litellm_module

_CREDENTIAL_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")
"""A variable litellm lists is a credential when its name says so (a base URL such as
``OLLAMA_API_BASE`` has a default and is not reported)."""


def needs_env_key(settings: Mapping[str, Any] | None) -> bool:
    """Whether a judge reads its key from the environment: not when ``model_settings`` give
    ``api_key``, or ``api_base`` / ``base_url`` (a local server).

    Example:
        >>> needs_env_key(None), needs_env_key({"api_base": "http://127.0.0.1:8000/v1"}), needs_env_key({"timeout": 5})
        (True, False, True)
    """
    given = settings or {}
    return not any(given.get(name) for name in ("api_key", "api_base", "base_url"))


def missing_env(model: str, settings: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """The environment variables holding the key that ``model``'s provider needs, when none of
    them is set (empty: the key is there, given in ``model_settings``, or litellm does not know
    the provider). Either of several names may do (``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``).

    Example:
        >>> import os
        >>> saved = os.environ.pop("ANTHROPIC_API_KEY", None)
        >>> missing_env("anthropic/claude-3-5-haiku-latest")
        ('ANTHROPIC_API_KEY',)
        >>> missing_env("anthropic/claude-3-5-haiku-latest", {"api_key": "k"}), missing_env("ollama/llama3")
        ((), ())
        >>> if saved is not None: os.environ["ANTHROPIC_API_KEY"] = saved
    """
    if not needs_env_key(settings):
        return ()
    try:
        report = litellm_module().validate_environment(model=model)
    except Exception:  # a model string litellm cannot place: the call reports it
        return ()
    if report.get("keys_in_environment"):
        return ()
    names = [str(name) for name in report.get("missing_keys") or ()]
    return tuple(name for name in names if any(word in name.upper() for word in _CREDENTIAL_WORDS))


def credentials_message(
    model: str, settings: Mapping[str, Any] | None, error: BaseException,
) -> tuple[str, tuple[str, ...]]:
    """The message of a judge call that failed for want of credentials, naming the model and the
    variables to set (or saying the provider refused the key), and those variables.

    Example:
        >>> import os
        >>> saved = os.environ.pop("ANTHROPIC_API_KEY", None)
        >>> text, names = credentials_message("anthropic/claude-3-5-haiku-latest", None, RuntimeError("Missing API key"))
        >>> names, "'anthropic/claude-3-5-haiku-latest' has no credentials: the environment does not set ANTHROPIC_API_KEY" in text
        (('ANTHROPIC_API_KEY',), True)
        >>> credentials_message("openai/gpt-4o-mini", {"api_key": "k"}, RuntimeError("401 Unauthorized"))[0]
        "Judge model 'openai/gpt-4o-mini' refused its credentials (not retried): 401 Unauthorized"
        >>> if saved is not None: os.environ["ANTHROPIC_API_KEY"] = saved
    """
    names = missing_env(model, settings)
    if names:
        return (f"Judge model {model!r} has no credentials: the environment does not set {', '.join(names)} "
                f"(or give model_settings api_key); not retried: {error}"), names
    return f"Judge model {model!r} refused its credentials (not retried): {error}", names
