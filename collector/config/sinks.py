"""``[sinks.*]``: the native score sinks (SPEC §5), each off until its URL is set.

Keys and tokens are `SecretStr` (never in ``repr``, logs, ``check`` output or metrics);
``env:NAME`` reads one from the environment when the sink starts. Retry bounds
(``min_backoff_s``, ``max_backoff_s``) follow the Collector's retry_on_failure (5 s to
30 s, with jitter); ``span_wait_s`` bounds how long a score waits for its span or trace
to reach the backend (forwarded spans may still be on their way).
"""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from collector.common.errors import ConfigError
from collector.config.checks import KeyProblem, sink_base_problem, url_problem

_MODEL = ConfigDict(extra="forbid", frozen=True)


def secret_value(secret: SecretStr, key: str) -> str:
    """A secret in clear: its value, or the variable it names as ``env:NAME``.

    Raises:
        ConfigError: ``env:NAME`` names a variable that is not set.

    Example:
        >>> secret_value(SecretStr("s3cret"), "sinks.phoenix.api_key")
        's3cret'
        >>> secret_value(SecretStr("env:TRACESCORE_DOCTEST_UNSET"), "sinks.mlflow.token")
        Traceback (most recent call last):
        ...
        collector.common.errors.ConfigError: invalid configuration: sinks.mlflow.token: environment variable TRACESCORE_DOCTEST_UNSET is not set
    """
    raw = secret.get_secret_value()
    if not raw.startswith("env:"):
        return raw
    name = raw[4:]
    value = os.environ.get(name)
    if value is None:
        raise ConfigError(f"invalid configuration: {key}: environment variable {name} is not set")
    return value


class SinkConfig(BaseModel):
    """What every sink has: how long to wait for the span, and retry bounds."""

    model_config = _MODEL
    span_wait_s: float = Field(default=600.0, ge=0)
    min_backoff_s: float = Field(default=5.0, gt=0)
    max_backoff_s: float = Field(default=30.0, gt=0)
    timeout_s: float = Field(default=10.0, gt=0)

    def url(self) -> str:
        """The backend's base URL ("" while the sink is off)."""
        raise NotImplementedError

    @property
    def enabled(self) -> bool:
        """Whether the sink is on (its URL is set).

        Example:
            >>> PhoenixSinkConfig().enabled, PhoenixSinkConfig(endpoint="http://127.0.0.1:6006").enabled
            (False, True)
        """
        return bool(self.url())

    def _check(self, name: str, url_key: str) -> None:
        problem = (url_problem(self.url()) or sink_base_problem(name, self.url())) if self.url() else None
        if problem:
            raise KeyProblem(f"sinks.{name}.{url_key}", problem)
        if self.min_backoff_s > self.max_backoff_s:
            raise KeyProblem(f"sinks.{name}.min_backoff_s", "must not exceed max_backoff_s")


class PhoenixSinkConfig(SinkConfig):
    """``[sinks.phoenix]``: span annotations on the scored span.

    Example:
        >>> PhoenixSinkConfig(endpoint="http://127.0.0.1:6006", api_key="k")
        PhoenixSinkConfig(span_wait_s=600.0, min_backoff_s=5.0, max_backoff_s=30.0, timeout_s=10.0, endpoint='http://127.0.0.1:6006', api_key=SecretStr('**********'))
    """

    endpoint: str = ""
    api_key: SecretStr = SecretStr("")

    def url(self) -> str:
        """The Phoenix server's base URL.

        Example:
            >>> PhoenixSinkConfig(endpoint="http://phoenix:6006/").url()
            'http://phoenix:6006'
        """
        return self.endpoint.rstrip("/")

    @model_validator(mode="after")
    def _valid(self) -> PhoenixSinkConfig:
        self._check("phoenix", "endpoint")
        return self


class MlflowSinkConfig(SinkConfig):
    """``[sinks.mlflow]``: assessments (feedback) on the trace ``tr-<trace id>``.

    Example:
        >>> MlflowSinkConfig(tracking_uri="http://127.0.0.1:5000").enabled
        True
    """

    tracking_uri: str = ""
    token: SecretStr = SecretStr("")

    def url(self) -> str:
        """The tracking server's base URL.

        Example:
            >>> MlflowSinkConfig(tracking_uri="http://mlflow:5000/").url()
            'http://mlflow:5000'
        """
        return self.tracking_uri.rstrip("/")

    @model_validator(mode="after")
    def _valid(self) -> MlflowSinkConfig:
        self._check("mlflow", "tracking_uri")
        return self


class LangfuseSinkConfig(SinkConfig):
    """``[sinks.langfuse]``: scores (basic auth with the project's public and secret key).

    Example:
        >>> LangfuseSinkConfig(host="https://cloud.langfuse.com").public_key
        SecretStr('**********')
    """

    host: str = ""
    public_key: SecretStr = SecretStr("env:LANGFUSE_PUBLIC_KEY")
    secret_key: SecretStr = SecretStr("env:LANGFUSE_SECRET_KEY")

    def url(self) -> str:
        """The Langfuse host's base URL.

        Example:
            >>> LangfuseSinkConfig(host="https://cloud.langfuse.com/").url()
            'https://cloud.langfuse.com'
        """
        return self.host.rstrip("/")

    @model_validator(mode="after")
    def _valid(self) -> LangfuseSinkConfig:
        self._check("langfuse", "host")
        return self


class SinksConfig(BaseModel):
    """Every native score sink; any number may be on at once.

    Example:
        >>> SinksConfig().enabled()
        []
        >>> SinksConfig(mlflow={"tracking_uri": "http://127.0.0.1:5000"}).enabled()
        ['mlflow']
    """

    model_config = _MODEL
    phoenix: PhoenixSinkConfig = Field(default_factory=PhoenixSinkConfig)
    mlflow: MlflowSinkConfig = Field(default_factory=MlflowSinkConfig)
    langfuse: LangfuseSinkConfig = Field(default_factory=LangfuseSinkConfig)

    def enabled(self) -> list[str]:
        """The names of the sinks that are on, in a fixed order (the store's outbox per sink).

        Example:
            >>> SinksConfig(phoenix={"endpoint": "http://p:6006"}, langfuse={"host": "http://l"}).enabled()
            ['phoenix', 'langfuse']
        """
        return [name for name in ("phoenix", "mlflow", "langfuse") if getattr(self, name).enabled]

    def urls(self) -> dict[str, str]:
        """The dotted key and URL of every sink that is on.

        Example:
            >>> SinksConfig(phoenix={"endpoint": "http://p:6006"}).urls()
            {'sinks.phoenix.endpoint': 'http://p:6006'}
        """
        keys = {"phoenix": "endpoint", "mlflow": "tracking_uri", "langfuse": "host"}
        return {f"sinks.{name}.{keys[name]}": getattr(self, name).url() for name in self.enabled()}

    def check_secrets(self) -> None:
        """Read every secret of the sinks that are on (an unset ``env:NAME`` fails here, at start).

        Example:
            >>> SinksConfig().check_secrets()
        """
        for name, keys in (("phoenix", ("api_key",)), ("mlflow", ("token",)),
                           ("langfuse", ("public_key", "secret_key"))):
            sink = getattr(self, name)
            if sink.enabled:
                for key in keys:
                    secret_value(getattr(sink, key), f"sinks.{name}.{key}")
