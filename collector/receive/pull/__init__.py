"""Pull: traces already in a backend (Phoenix, MLflow, Langfuse), read back as the receivers'
spans, for ``tracescore score --from`` (SPEC §10).

Receiving, the other way round: instead of an agent posting OTLP, a `Puller` pages through
the backend's own read API (`phoenix`, `mlflow`, `langfuse`), with retries and backoff
(`client`), and hands on pages of complete traces (`page`) made of the adapters'
`TraceSpan`s, decoded as the receivers decode them (`otlp_json`): the same adapters then
find the same runs. `source` parses ``--from``/``--since``/``--until``; `cursor` keeps how
far a backfill got. `open_puller` picks the backend and its credentials: from the URL
(``user:password@``), else the sink's configuration (``[sinks.phoenix] api_key``,
``[sinks.mlflow] token``, ``[sinks.langfuse]`` keys, ``env:NAME`` accepted), else the
backend's usual variables (``PHOENIX_API_KEY``, ``MLFLOW_TRACKING_TOKEN``,
``LANGFUSE_PUBLIC_KEY``/``LANGFUSE_SECRET_KEY``).
"""

from __future__ import annotations

import os

import aiohttp

from collector.config import SinksConfig, secret_value
from collector.receive.pull.client import JsonClient, Retry
from collector.receive.pull.cursor import Cursor
from collector.receive.pull.langfuse import LangfusePuller
from collector.receive.pull.mlflow import MlflowPuller
from collector.receive.pull.page import Page, Puller
from collector.receive.pull.phoenix import PhoenixPuller
from collector.receive.pull.source import (
    Source,
    Window,
    mask_url,
    parse_source,
    parse_time,
    window_between,
)

__all__ = ["Cursor", "JsonClient", "Page", "Puller", "Retry", "Source", "Window", "client_for", "mask_url",
           "open_puller", "parse_source", "parse_time", "window_between"]


def client_for(source: Source, sinks: SinksConfig, retry: Retry | None = None) -> JsonClient:
    """The HTTP client of ``source``, with its credentials (see the module docstring).

    Raises:
        collector.common.errors.ConfigError: a sink's ``env:NAME`` names an unset variable.

    Example:
        >>> c = client_for(parse_source("phoenix+http://h:6006/p"), SinksConfig(phoenix={"api_key": "k"}))
        >>> c.headers
        {'Authorization': 'Bearer k'}
        >>> client_for(parse_source("langfuse+http://pk:sk@h"), SinksConfig()).auth.login
        'pk'
    """
    headers: dict[str, str] = {}
    auth = None
    if source.username or source.password:
        auth = aiohttp.BasicAuth(source.username, source.password)
    elif source.backend == "phoenix":
        key = secret_value(sinks.phoenix.api_key, "sinks.phoenix.api_key") or os.environ.get("PHOENIX_API_KEY", "")
        if key:
            headers["Authorization"] = f"Bearer {key}"
    elif source.backend == "mlflow":
        token = secret_value(sinks.mlflow.token, "sinks.mlflow.token") or os.environ.get("MLFLOW_TRACKING_TOKEN", "")
        if token:
            headers["Authorization"] = f"Bearer {token}"
    else:
        auth = aiohttp.BasicAuth(secret_value(sinks.langfuse.public_key, "sinks.langfuse.public_key"),
                                 secret_value(sinks.langfuse.secret_key, "sinks.langfuse.secret_key"))
    return JsonClient(headers, retry, auth)


def open_puller(source: Source, client: JsonClient, window: Window, filter_text: str | None = None,
                page_size: int | None = None) -> Puller:
    """The reader of ``source``'s backend over ``client``.

    Example:
        >>> open_puller(parse_source("mlflow+http://h:5000/3"), JsonClient(), Window()).name
        'mlflow'
    """
    if source.backend == "phoenix":
        return PhoenixPuller(client, source, window, filter_text, page_size or 100)
    if source.backend == "mlflow":
        return MlflowPuller(client, source, window, filter_text, page_size or 100)
    return LangfusePuller(client, source.base_url, window, filter_text, page_size or 50)
