"""``[sinks.*]``: URLs checked at load (shape, port, never the daemon's own listener, however the
host is written), secrets from ``env:NAME`` and never printed, env overrides per sink."""

from __future__ import annotations

import argparse
import re
import socket
from pathlib import Path

import pytest

from collector.commands import check
from collector.common.errors import ConfigError
from collector.config import config_from_dict

LISTENERS = {"receiver": {"grpc_endpoint": "127.0.0.1:14317", "http_endpoint": "0.0.0.0:14318"}}


@pytest.mark.parametrize("url", [
    "http://localhost:14318", "http://127.0.0.1:14318/", "http://[::1]:14318", "http://0.0.0.0:14318",
    "http://127.0.0.2:14318", f"http://{socket.gethostname()}:14318",
])
def test_a_sink_on_the_daemons_own_listener_is_refused(url: str) -> None:
    with pytest.raises(ConfigError, match=r"sinks.phoenix.endpoint: .* is this daemon's own listener 0.0.0.0:14318"):
        config_from_dict({**LISTENERS, "sinks": {"phoenix": {"endpoint": url}}}, env={})


def test_a_sink_on_a_loopback_listener_port_is_refused_by_any_loopback_name() -> None:
    with pytest.raises(ConfigError, match="sinks.mlflow.tracking_uri: .* own listener 127.0.0.1:14317"):
        config_from_dict({**LISTENERS, "sinks": {"mlflow": {"tracking_uri": "http://localhost:14317"}}}, env={})
    ok = config_from_dict({**LISTENERS, "sinks": {"mlflow": {"tracking_uri": "http://127.0.0.1:5000"}}}, env={})
    assert ok.sinks.enabled() == ["mlflow"]


@pytest.mark.parametrize(("sink", "key", "url", "problem"), [
    ("phoenix", "endpoint", "htp//host", "must be http(s)://HOST"),
    ("mlflow", "tracking_uri", "http://host:70000", "port 70000 is outside 1..65535"),
    ("langfuse", "host", "ftp://cloud.langfuse.com", "must be http(s)://HOST"),
])
def test_bad_sink_urls_name_their_key(sink: str, key: str, url: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"sinks.{sink}.{key}: {problem}")):
        config_from_dict({"sinks": {sink: {key: url}}}, env={})


def test_secrets_come_from_env_names_and_an_unset_one_fails_at_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LANGFUSE_PUBLIC_KEY", raising=False)
    monkeypatch.delenv("LANGFUSE_SECRET_KEY", raising=False)
    with pytest.raises(ConfigError, match="sinks.langfuse.public_key: environment variable LANGFUSE_PUBLIC_KEY"):
        config_from_dict({"sinks": {"langfuse": {"host": "https://cloud.langfuse.com"}}}, env={})
    config_from_dict({}, env={})  # a sink that is off needs no secret
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-secret")
    config = config_from_dict({"sinks": {"langfuse": {"host": "https://cloud.langfuse.com"}}}, env={})
    assert "sk-secret" not in repr(config) and "sk-secret" not in str(config.model_dump())


def test_env_variables_override_a_sinks_keys() -> None:
    config = config_from_dict({"sinks": {"phoenix": {"endpoint": "http://a:6006"}}}, env={
        "TRACESCORE_SINKS_PHOENIX_ENDPOINT": "http://phoenix:6006", "TRACESCORE_SINKS_PHOENIX_SPAN_WAIT_S": "30",
        "TRACESCORE_SINKS_MLFLOW_TRACKING_URI": "http://mlflow:5000", "TRACESCORE_SINKS_MLFLOW_TOKEN": "t0k3n"})
    assert (config.sinks.phoenix.endpoint, config.sinks.phoenix.span_wait_s) == ("http://phoenix:6006", 30.0)
    assert config.sinks.mlflow.token.get_secret_value() == "t0k3n" and config.sinks.enabled() == ["phoenix", "mlflow"]
    with pytest.raises(ConfigError, match="sinks.phoenix.nope: unknown key"):
        config_from_dict({}, env={"TRACESCORE_SINKS_PHOENIX_NOPE": "1"})


def test_check_lists_the_sinks_and_never_their_secrets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ts.toml"
    path.write_text('[sinks.phoenix]\nendpoint = "http://127.0.0.1:6006"\napi_key = "px-s3cret"\n'
                    '[sinks.mlflow]\ntracking_uri = "http://127.0.0.1:5000"\ntoken = "ml-s3cret"\n')
    assert check.run(argparse.Namespace(config=str(path))) == 0
    out = capsys.readouterr().out
    assert "sink phoenix: http://127.0.0.1:6006" in out and "sink mlflow: http://127.0.0.1:5000" in out
    assert "s3cret" not in out
