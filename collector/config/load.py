"""Loading the configuration: a TOML file, then ``TRACESCORE_<SECTION>_<KEY>`` variables
over it, then the standard ``OTEL_EXPORTER_OTLP_*`` variables where ``[export]`` is
silent; validated into `Config`, with errors naming the key's dotted path."""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from collector.common.errors import ConfigError
from collector.config.checks import KeyProblem
from collector.config.sections import Config, ReceiverConfig

_SECTIONS = ("receiver", "assembly", "sessions", "queue", "workers", "export", "judge", "labels")


def _env_value(raw: str) -> Any:
    """An env value: TOML inline tables and arrays are parsed, anything else stays a string.

    Pydantic coerces strings into numbers and booleans for typed fields, and a string
    field (a token "123") keeps its text.
    """
    if raw.strip()[:1] in ("{", "["):
        try:
            return tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            return raw
    return raw


def _parse_otel_headers(raw: str) -> dict[str, str]:
    from urllib.parse import unquote

    headers: dict[str, str] = {}
    for item in raw.split(","):
        if "=" in item:
            key, value = item.split("=", 1)
            headers[unquote(key.strip())] = unquote(value.strip())
    return headers


_SINKS = ("phoenix", "mlflow", "langfuse")


def _apply_sink_env(data: dict[str, Any], rest: str, raw: str) -> None:
    """``TRACESCORE_SINKS_<SINK>_<KEY>`` (``rest``: what follows ``TRACESCORE_``, lowercased)."""
    sink = next((s for s in _SINKS if rest.startswith(f"sinks_{s}_")), None)
    if sink is None:
        return
    sinks = data.setdefault("sinks", {})
    if not isinstance(sinks, dict) or not isinstance(sinks.setdefault(sink, {}), dict):
        raise ConfigError(f"sinks.{sink}: must be a table")
    sinks[sink][rest[len(f"sinks_{sink}_"):]] = _env_value(raw)


def _apply_env(data: dict[str, Any], env: Mapping[str, str]) -> None:
    for name, raw in env.items():
        if not name.startswith("TRACESCORE_"):
            continue
        rest = name[len("TRACESCORE_") :].lower()
        _apply_sink_env(data, rest, raw)
        section = next((s for s in _SECTIONS if rest.startswith(s + "_")), None)
        if section is None:
            continue
        key = rest[len(section) + 1 :]
        table = data.setdefault(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{section}: must be a table")
        if section == "judge" and key.startswith("budgets_"):  # TRACESCORE_JUDGE_BUDGETS_USD
            table, key = table.setdefault("budgets", {}), key[len("budgets_"):]
            if not isinstance(table, dict):
                raise ConfigError("judge.budgets: must be a table")
        table[key] = _env_value(raw)


def _apply_otel(data: dict[str, Any], env: Mapping[str, str]) -> None:
    export = data.setdefault("export", {})
    if not isinstance(export, dict):
        return
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if "endpoint" not in export and endpoint:
        export["endpoint"] = endpoint
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    if "protocol" not in export and protocol:
        export["protocol"] = protocol
    headers = env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or env.get("OTEL_EXPORTER_OTLP_HEADERS")
    if "headers" not in export and headers:
        export["headers"] = _parse_otel_headers(headers)


def known_keys(loc: Sequence[str | int]) -> list[str]:
    """The keys the table at ``loc`` (a path from the root, list indexes included) may hold.

    Example:
        >>> known_keys(("sinks",))
        ['phoenix', 'mlflow', 'langfuse']
        >>> "service" in known_keys(("scorers", 0, "filter")), known_keys(("export", "headers"))
        (True, [])
    """
    model: Any = Config
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return []
        model = field.annotation
        for arg in get_args(model):  # list[ScorerConfig], SomeModel | None
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                model = arg
    return list(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []


def unknown_key_message(loc: Sequence[str | int]) -> str:
    """What to say of the unknown key at ``loc``: the known key it is closest to (difflib), else
    the keys its table takes.

    Example:
        >>> unknown_key_message(("sessions", "idle"))
        "unknown key; did you mean 'idle_s'?"
        >>> unknown_key_message(("sinks", "jaeger"))
        'unknown key; [sinks] takes phoenix, mlflow, langfuse'
    """
    keys = known_keys(loc[:-1])
    if not keys:
        return "unknown key"
    close = difflib.get_close_matches(str(loc[-1]), keys, n=1, cutoff=0.6)
    if close:
        return f"unknown key; did you mean {close[0]!r}?"
    table = ".".join(str(p) for p in loc[:-1] if not isinstance(p, int))
    return f"unknown key; {f'[{table}]' if table else 'the configuration'} takes {', '.join(keys)}"


def _format_validation(err: ValidationError) -> str:
    lines = []
    for item in err.errors():
        path = ".".join(str(p) for p in item["loc"]) or "(root)"
        msg = unknown_key_message(item["loc"]) if item["type"] == "extra_forbidden" else item["msg"]
        msg = msg.removeprefix("Value error, ")
        problem = (item.get("ctx") or {}).get("error")
        if isinstance(problem, KeyProblem):  # a check across keys names the key at fault
            path, msg = problem.key, problem.message
        lines.append(f"{path}: {msg}")
    return "invalid configuration: " + "; ".join(lines)


def config_from_dict(
    data: Mapping[str, Any], env: Mapping[str, str] | None = None, *, secrets: bool = True
) -> Config:
    """Validate a parsed TOML document, applying env overrides and OTEL fallbacks.

    With ``secrets`` (the default, what a daemon and ``check`` need), every ``env:NAME``
    secret in force must name a set variable; without, they are left unread, for commands
    that only work on the store (``dead-letters``) and must not need the sinks' keys.

    Raises:
        ConfigError: on unknown keys or bad values, naming the key path.

    Example:
        >>> config_from_dict({"assembly": {"decision_wait": 0.2}}, env={}).assembly.decision_wait
        0.2
        >>> config_from_dict({"receiver": {"http_endpont": "0.0.0.0:4318"}}, env={})
        Traceback (most recent call last):
        ...
        collector.common.errors.ConfigError: invalid configuration: receiver.http_endpont: unknown key; did you mean 'http_endpoint'?
    """
    env = os.environ if env is None else env
    merged: dict[str, Any] = {
        k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()
    }
    _apply_env(merged, env)
    _apply_otel(merged, env)
    try:
        config = Config.model_validate(merged)
    except ValidationError as err:
        raise ConfigError(_format_validation(err)) from None
    if secrets:
        config.receiver.token()  # an "env:NAME" token whose variable is unset fails here, at start
        config.sinks.check_secrets()
    return config


def _read_toml(path: str | Path) -> dict[str, Any]:
    """The TOML document at ``path``.

    Raises:
        ConfigError: when the file is missing or is not TOML.
    """
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None


def load_config(
    path: str | Path | None, env: Mapping[str, str] | None = None, *, secrets: bool = True
) -> Config:
    """Load the TOML file at ``path`` (or only env and defaults when None); ``secrets`` as in
    `config_from_dict`.

    Raises:
        ConfigError: when the file is missing, is not TOML, or does not validate.

    Example:
        >>> load_config(None, env={"TRACESCORE_WORKERS_CONCURRENCY": "4"}).workers.concurrency
        4
    """
    data = _read_toml(path) if path is not None else {}
    return config_from_dict(data, env, secrets=secrets)


def load_receiver(path: str | Path, env: Mapping[str, str] | None = None) -> ReceiverConfig:
    """The ``[receiver]`` section of the configuration file at ``path``, with its
    ``TRACESCORE_RECEIVER_*`` overrides: what a command that talks to the running daemon
    needs to find it (``tracescore status``). The other sections are the daemon's business:
    a sink secret read from a variable this shell does not set is no error here, and the
    receiver's own ``env:NAME`` token is read only if the caller asks for it.

    Raises:
        ConfigError: when the file is missing, is not TOML, or its ``[receiver]`` section
            does not validate (naming the key).

    Example:
        >>> import pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "ts.toml"
        >>> _ = path.write_text('[receiver]\\nhttp_endpoint = "0.0.0.0:14318"\\n[sinks.langfuse]\\nhost = "https://x"\\n'
        ...                     'public_key = "env:UNSET_HERE"\\nsecret_key = "env:UNSET_HERE"\\n')
        >>> load_receiver(path, env={}).http_endpoint
        '0.0.0.0:14318'
        >>> load_receiver(path, env={"TRACESCORE_RECEIVER_HTTP_ENDPOINT": "127.0.0.1:0"}).http_endpoint
        '127.0.0.1:0'
        >>> load_config(path, env={})
        Traceback (most recent call last):
        ...
        collector.common.errors.ConfigError: invalid configuration: sinks.langfuse.public_key: environment variable UNSET_HERE is not set
        >>> load_config(path, env={}, secrets=False).sinks.langfuse.host
        'https://x'
    """
    data = _read_toml(path)
    _apply_env(data, os.environ if env is None else env)
    try:
        return Config.model_validate({"receiver": data.get("receiver", {})}).receiver
    except ValidationError as err:
        raise ConfigError(_format_validation(err)) from None
