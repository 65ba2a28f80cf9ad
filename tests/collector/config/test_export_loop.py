"""SPEC §5, never a loop: ``export.endpoint`` (from the file, ``TRACESCORE_EXPORT_ENDPOINT`` or the
``OTEL_EXPORTER_OTLP_*`` variables) reaching one of the daemon's own listeners, however its host
is written, is a configuration error naming the key; at start the check runs again with the
ports actually bound (a listener on port 0 gets its port only then)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from collector.cli import main
from collector.common.errors import ConfigError
from collector.config import KeyProblem, check_destinations, config_from_dict

LISTENERS = {"receiver": {"grpc_endpoint": "127.0.0.1:14317", "http_endpoint": "0.0.0.0:14318"}}
LOOPBACK = {"receiver": {"grpc_endpoint": "127.0.0.1:14317", "http_endpoint": "127.0.0.1:14318"}}


def host_address() -> str:
    """An address of this host that its name resolves to (a non-loopback one when there is one)."""
    addresses = {str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)}
    outside = sorted(a for a in addresses if not a.startswith("127."))
    return (outside or sorted(addresses))[0]


@pytest.mark.parametrize("endpoint", [
    "http://localhost:14318", "http://127.0.0.2:14318", "http://[::1]:14318", "http://0.0.0.0:14318",
    f"http://{socket.gethostname()}:14318", "localhost:14318", "https://localhost:14318/v1/traces",
])
def test_an_export_endpoint_on_a_wildcard_listener_is_refused(endpoint: str) -> None:
    with pytest.raises(ConfigError, match=r"export.endpoint: .* is this daemon's own listener 0.0.0.0:14318: "
                                          r"it would receive its own output for ever"):
        config_from_dict({**LISTENERS, "export": {"endpoint": endpoint}}, env={})


@pytest.mark.parametrize("endpoint", [
    "http://localhost:14318", "http://127.0.0.2:14318", "http://[::1]:14318", "http://0.0.0.0:14318",
    "http://localhost:14317",
])
def test_an_export_endpoint_on_a_loopback_listener_is_refused(endpoint: str) -> None:
    with pytest.raises(ConfigError, match=r"export.endpoint: .* is this daemon's own listener 127.0.0.1:1431[78]"):
        config_from_dict({**LOOPBACK, "export": {"endpoint": endpoint}}, env={})


def test_the_host_name_reaches_a_loopback_listener_when_it_resolves_to_loopback() -> None:
    """The host's own name on the port of a loopback listener: refused exactly when the name
    resolves to a loopback address (as on most hosts); otherwise it is another listener."""
    name = socket.gethostname()
    loopback = any(info[4][0].startswith("127.") or info[4][0] == "::1" for info in socket.getaddrinfo(name, None))
    data = {**LOOPBACK, "export": {"endpoint": f"http://{name}:14318"}}
    if loopback:
        with pytest.raises(ConfigError, match="export.endpoint: .* own listener 127.0.0.1:14318"):
            config_from_dict(data, env={})
    else:
        assert config_from_dict(data, env={}).export.endpoint == f"http://{name}:14318"


def test_the_hosts_own_address_reaches_a_wildcard_listener() -> None:
    endpoint = f"http://{host_address()}:14318"
    with pytest.raises(ConfigError, match=r"export.endpoint: .* own listener 0.0.0.0:14318"):
        config_from_dict({**LISTENERS, "export": {"endpoint": endpoint}}, env={})


@pytest.mark.parametrize("endpoint", [
    "http://localhost:14319", "http://127.0.0.1:4317", "http://[::1]:4318", f"http://{socket.gethostname()}:4318",
    "http://backend.invalid:14318",
])
def test_an_export_endpoint_on_another_port_or_host_is_accepted(endpoint: str) -> None:
    assert config_from_dict({**LISTENERS, "export": {"endpoint": endpoint}}, env={}).export.endpoint == endpoint


@pytest.mark.parametrize("variable", [
    "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "TRACESCORE_EXPORT_ENDPOINT",
])
def test_a_self_export_from_the_environment_is_refused(variable: str) -> None:
    with pytest.raises(ConfigError, match="export.endpoint: http://localhost:4318 is this daemon's own listener"):
        config_from_dict({}, env={variable: "http://localhost:4318"})


def test_a_disabled_listener_is_no_destination_to_refuse() -> None:
    data = {"receiver": {"grpc_endpoint": "", "http_endpoint": "127.0.0.1:14318"},
            "export": {"endpoint": "http://localhost:4317"}}
    assert config_from_dict(data, env={}).export.endpoint == "http://localhost:4317"


def test_check_exits_2_naming_export_endpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "tracescore.toml"
    config.write_text('[receiver]\nhttp_endpoint = "127.0.0.1:14318"\n[export]\nendpoint = "http://localhost:14318"\n')
    assert main(["check", str(config)]) == 2
    err = capsys.readouterr().err
    assert "export.endpoint: http://localhost:14318 is this daemon's own listener 127.0.0.1:14318" in err
    config.write_text('[receiver]\nhttp_endpoint = "127.0.0.1:14318"\n[export]\nendpoint = "http://localhost:14319"\n')
    assert main(["check", str(config)]) == 0
    assert "warning: export.endpoint" not in capsys.readouterr().out


def test_listeners_on_port_0_are_checked_with_their_bound_ports() -> None:
    """A config with port-0 listeners cannot be checked at load; at start the bound ports are."""
    data = {"receiver": {"grpc_endpoint": "127.0.0.1:0", "http_endpoint": "0.0.0.0:0"},
            "export": {"endpoint": "http://localhost:40001"},
            "sinks": {"phoenix": {"endpoint": "http://localhost:40002"}}}
    config = config_from_dict(data, env={})
    check_destinations(config.destinations(), ["127.0.0.1:40003", "0.0.0.0:40004"])
    with pytest.raises(KeyProblem, match="http://localhost:40001 is this daemon's own listener 127.0.0.1:40001") as err:
        check_destinations(config.destinations(), ["127.0.0.1:40001", "0.0.0.0:40004"])
    assert err.value.key == "export.endpoint"
    with pytest.raises(KeyProblem, match="http://localhost:40002 is this daemon's own listener 0.0.0.0:40002") as err:
        check_destinations(config.destinations(), ["127.0.0.1:40003", "0.0.0.0:40002"])
    assert err.value.key == "sinks.phoenix.endpoint"
