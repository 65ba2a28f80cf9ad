"""Daemon configuration: one frozen pydantic model per component, loaded from TOML and env.

Precedence, highest first: ``TRACESCORE_<SECTION>_<KEY>`` environment variables, the TOML
file, the standard ``OTEL_EXPORTER_OTLP_*`` variables (export only), the defaults.
Every key has a default, so an empty file (or none) is a valid configuration. Unknown keys
and bad values raise `collector.common.errors.ConfigError` naming the key's dotted path.
`sections` holds the models (``[judge]``, ``[sessions]`` and ``[sinks.*]`` have modules of their
own), `checks` the value checks across keys, `load` the loading.
"""

from collector.config.checks import (
    KeyProblem,
    check_destinations,
    endpoint_host_port,
    http_url,
    without_password,
)
from collector.config.judge import BudgetsConfig, JudgeConfig
from collector.config.load import config_from_dict, load_config, load_receiver
from collector.config.sections import (
    AssemblyConfig,
    Config,
    ExportConfig,
    FilterConfig,
    QueueConfig,
    ReceiverConfig,
    ScorerConfig,
    WorkersConfig,
)
from collector.config.sessions import SessionsConfig
from collector.config.sinks import (
    LangfuseSinkConfig,
    MlflowSinkConfig,
    PhoenixSinkConfig,
    SinksConfig,
    secret_value,
)

__all__ = [
    "AssemblyConfig", "BudgetsConfig", "Config", "ExportConfig", "FilterConfig", "JudgeConfig", "KeyProblem", "LangfuseSinkConfig",
    "MlflowSinkConfig", "PhoenixSinkConfig", "QueueConfig", "ReceiverConfig", "ScorerConfig",
    "SessionsConfig", "SinksConfig", "WorkersConfig", "check_destinations", "config_from_dict", "endpoint_host_port", "http_url", "load_config",
    "load_receiver", "secret_value", "without_password",
]
