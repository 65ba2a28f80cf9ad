"""Checks of configuration values that pydantic's types cannot express: listen addresses,
export endpoints and Redis URLs. A failed check raises `KeyProblem`, which names the key."""

from __future__ import annotations

import functools
import inspect
from typing import Any
from urllib.parse import urlsplit

from redis.asyncio.connection import Connection, parse_url


class KeyProblem(ValueError):
    """A bad value found by a check across keys: ``key`` is its dotted path from the root.

    Pydantic reports a model-level check at the model's own path; this carries the path of
    the key at fault, so the message names it (``receiver.tls_key_file: ...``).

    Example:
        >>> KeyProblem("export.endpoint", "is this daemon's own receiver").key
        'export.endpoint'
    """

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


def check_receiver_endpoint(value: str, key: str) -> None:
    """A receiver listen address must be ``HOST:PORT`` or empty (disabled).

    Example:
        >>> check_receiver_endpoint("127.0.0.1:4317", "grpc_endpoint")
        >>> check_receiver_endpoint("localhost", "grpc_endpoint")
        Traceback (most recent call last):
        ...
        collector.config.checks.KeyProblem: must be HOST:PORT or empty, got 'localhost'
    """
    if value and (":" not in value or not value.rsplit(":", 1)[1].isdigit()):
        raise KeyProblem(f"receiver.{key}", f"must be HOST:PORT or empty, got {value!r}")


def endpoint_host_port(endpoint: str) -> str:
    """The ``host:port`` an export endpoint URL (or bare ``host:port``) points at.

    Example:
        >>> endpoint_host_port("http://127.0.0.1:4318/v1/traces"), endpoint_host_port("backend:4317")
        ('127.0.0.1:4318', 'backend:4317')
    """
    return endpoint.split("://", 1)[-1].split("/", 1)[0]


def check_redis_url(url: str) -> None:
    """Refuse what redis-py would refuse only when connecting: a bad port, database or option.

    Example:
        >>> check_redis_url("redis://127.0.0.1:6379/0")
        >>> check_redis_url("redis://127.0.0.1:6379/zero")
        Traceback (most recent call last):
        ...
        collector.config.checks.KeyProblem: the database must be a number, got 'zero'
    """
    try:
        options = parse_url(url)
    except ValueError as err:
        raise KeyProblem("queue.url", f"not a valid Redis URL: {err}") from None
    database = urlsplit(url).path.strip("/")
    if database and not database.isdigit():
        raise KeyProblem("queue.url", f"the database must be a number, got {database!r}")
    connection_class: Any = options.get("connection_class", Connection)
    unknown = sorted(set(options) - {"connection_class"} - _connection_options(connection_class))
    if unknown:
        raise KeyProblem("queue.url", f"options Redis does not know: {', '.join(unknown)}")


@functools.cache
def _connection_options(connection_class: type) -> frozenset[str]:
    """The keyword options a redis-py connection class takes (its __init__ and its bases')."""
    names: set[str] = set()
    for klass in connection_class.__mro__:
        init = klass.__dict__.get("__init__")
        if init is not None:
            names.update(p.name for p in inspect.signature(init).parameters.values()
                         if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
    return frozenset(names - {"self"})
