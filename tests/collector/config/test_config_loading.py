"""Configuration: defaults, TOML, env overrides, OTEL fallbacks, errors naming the key path."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from pydantic import ValidationError
from repo_paths import REPO

from collector.commands import check
from collector.common.errors import ConfigError
from collector.config import Config, config_from_dict, load_config


def test_defaults_match_spec() -> None:
    cfg = Config()
    assert cfg.receiver.grpc_endpoint == "127.0.0.1:4317"
    assert cfg.receiver.http_endpoint == "127.0.0.1:4318"
    assert cfg.receiver.max_body_bytes == 16 * 1024 * 1024
    assert cfg.assembly.decision_wait == 5.0
    assert cfg.queue.url == "sqlite:///.tracescore/queue.db"
    assert cfg.workers.concurrency == 64 and cfg.workers.judge_concurrency == 32
    assert cfg.export.forward_spans is True and cfg.export.max_attribute_chars == 4096
    assert cfg.scorers == []


def test_toml_file_and_env_override(tmp_path: Path) -> None:
    path = tmp_path / "ts.toml"
    path.write_text(
        '[assembly]\ndecision_wait = 0.5\n[export]\nendpoint = "http://backend:4317"\n'
        'headers = { "x-key" = "v" }\n'
        '[[scorers]]\nref = "my_scorers:quality"\nsampling = 0.25\n'
        'filter = { service = "support-bot", attributes = { env = "prod" } }\n'
    )
    cfg = load_config(path, env={"TRACESCORE_ASSEMBLY_DECISION_WAIT": "0.2",
                                 "TRACESCORE_EXPORT_FORWARD_SPANS": "false",
                                 "TRACESCORE_RECEIVER_AUTH_TOKEN": "123",
                                 "TRACESCORE_RECEIVER_GRPC_ENDPOINT": "0.0.0.0:4317",
                                 "TRACESCORE_EXPORT_HEADERS": '{ "api-key" = "k" }'})
    assert cfg.receiver.token() == "123" and cfg.receiver.grpc_endpoint == "0.0.0.0:4317"
    assert cfg.assembly.decision_wait == 0.2
    assert cfg.export.forward_spans is False
    assert cfg.export.header_values() == {"api-key": "k"}
    assert cfg.scorers[0].sampling == 0.25
    assert cfg.scorers[0].filter.service == "support-bot"
    assert cfg.scorers[0].filter.attributes == {"env": "prod"}


def test_otel_variables_fill_export_only_when_not_configured() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://tempo:4318",
           "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
           "OTEL_EXPORTER_OTLP_HEADERS": "api-key=abc%20d,x=y"}
    cfg = config_from_dict({}, env=env)
    assert (cfg.export.endpoint, cfg.export.protocol) == ("http://tempo:4318", "http/protobuf")
    assert cfg.export.header_values() == {"api-key": "abc d", "x": "y"}
    assert "abc d" not in repr(cfg)
    cfg = config_from_dict({"export": {"endpoint": "http://jaeger:4317"}}, env=env)
    assert cfg.export.endpoint == "http://jaeger:4317"


@pytest.mark.parametrize(
    ("data", "env", "path"),
    [
        ({"receiver": {"nope": 1}}, {}, "receiver.nope: unknown key"),
        ({"bogus": {}}, {}, "bogus: unknown key"),
        ({"assembly": {"decision_wait": -1}}, {}, "assembly.decision_wait"),
        ({"export": {"protocol": "udp"}}, {}, "export.protocol"),
        ({"scorers": [{"ref": "x:y", "sampling": 2}]}, {}, "scorers.0.sampling"),
        ({"scorers": [{"ref": "x:y", "colour": 1}]}, {}, "scorers.0.colour: unknown key"),
        ({}, {"TRACESCORE_WORKERS_CONCURENCY": "3"}, "workers.concurency: unknown key"),
        ({}, {"TRACESCORE_WORKERS_CONCURRENCY": "many"}, "workers.concurrency"),
        ({"queue": {"url": "postgres://x"}}, {}, "queue"),
        ({"queue": {"url": "mysql://x"}}, {}, "queue.url: must start with"),
        ({"receiver": {"grpc_endpoint": "bad"}}, {}, "receiver.grpc_endpoint: must be HOST:PORT"),
        ({"receiver": {"tls_cert_file": "c.pem"}}, {}, "receiver.tls_key_file: "),
        ({"scorers": [{"ref": "nocolon"}]}, {}, "scorers.0.ref: must be module:attribute"),
        ({"export": {"endpoint": "not a url"}}, {}, "export.endpoint: must be http(s)://HOST"),
        ({"queue": {"url": "redis://127.0.0.1:notaport/0"}}, {}, "queue.url: not a valid Redis URL"),
        ({"queue": {"url": "redis://127.0.0.1:6379/abc"}}, {}, "queue.url: the database must be a number"),
        ({"queue": {"url": "redis://127.0.0.1:6379/0?foo=bar"}}, {}, "queue.url: options Redis does not know: foo"),
        ({"export": {"endpoint": "ftp://h:21"}}, {}, "export.endpoint: must be http(s)://HOST"),
        ({}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost"}, "export.endpoint: must be"),
        ({"workers": {"judge_rpm": -5}}, {}, "workers.judge_rpm"),
        ({"workers": {"judge_rpm_by_model": {"openai/gpt-4o": -1}}}, {},
         "workers.judge_rpm_by_model.openai/gpt-4o"),
    ],
)
def test_bad_configuration_names_the_key(data: dict, env: dict, path: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_dict(data, env=env)
    assert path in str(info.value)


def test_config_is_frozen() -> None:
    with pytest.raises(ValidationError):
        Config().receiver.max_body_bytes = 3  # type: ignore[misc]


SPEC_EXAMPLE = """
[receiver]
grpc_endpoint = "127.0.0.1:4317"     # "" disables
http_endpoint = "127.0.0.1:4318"     # "" disables
auth_token = ""                      # bearer token; "env:NAME" reads it from NAME
max_body_bytes = 16777216            # also the limit after gzip decompression

[assembly]
decision_wait = 5.0                  # seconds after a run span arrives
max_traces = 100000
max_spans_per_trace = 10000

[queue]
url = "sqlite:///.tracescore/queue.db"   # or "redis://127.0.0.1:6379/0"

[workers]
concurrency = 64                     # jobs in flight per worker process
judge_concurrency = 32               # judge calls in flight per model

[export]
endpoint = "http://127.0.0.1:4317"   # a trace backend, or another collector
protocol = "grpc"                    # or "http/protobuf"
headers = {}
forward_spans = true
max_attribute_chars = 4096

[[scorers]]
ref = "my_scorers:quality"           # module:attribute, importable or a file path
sampling = 1.0                       # 0..1, deterministic on trace id
filter = { service = "support-bot" } # service, agent, span_name, attributes
"""


def test_the_spec_example_configuration_loads_with_another_export_port(tmp_path: Path) -> None:
    """SPEC §4's example, verbatim, exports to its own gRPC receiver 127.0.0.1:4317: refused
    (SPEC §5, never a loop), naming export.endpoint. With another export port it loads."""
    path = tmp_path / "tracescore.toml"
    path.write_text(SPEC_EXAMPLE)
    with pytest.raises(ConfigError, match=r"export.endpoint: http://127.0.0.1:4317 is this daemon's own "
                                          r"listener 127.0.0.1:4317: it would receive its own output for ever"):
        load_config(path, env={})
    path.write_text(SPEC_EXAMPLE.replace('endpoint = "http://127.0.0.1:4317"', 'endpoint = "http://127.0.0.1:14317"'))
    config = load_config(path, env={})
    assert (config.receiver.max_body_bytes, config.assembly.max_spans_per_trace,
            config.workers.judge_concurrency, config.export.max_attribute_chars) == (16777216, 10000, 32, 4096)
    assert config.scorers[0].filter.service == "support-bot"
    assert config.export.endpoint == "http://127.0.0.1:14317"


def test_a_daemon_exporting_to_itself_is_refused_and_one_exporting_elsewhere_forwards(tmp_path: Path) -> None:
    from collector.service import Service
    from collector.work.registry import ScorerRegistry

    queue = {"url": f"sqlite:///{tmp_path / 'q.db'}"}
    with pytest.raises(ConfigError, match="export.endpoint: http://127.0.0.1:4317 is this daemon's own listener"):
        config_from_dict({"queue": queue, "export": {"endpoint": "http://127.0.0.1:4317"}}, env={})
    other = config_from_dict({"queue": queue, "export": {"endpoint": "http://127.0.0.1:14317"}}, env={})
    assert Service(other, ScorerRegistry([])).forwarder is not None


def test_an_auth_token_from_an_unset_variable_fails_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """A daemon meant to require a token must not start open because a variable is missing;
    a variable set to "" disables auth on purpose (as auth_token = "" does)."""
    monkeypatch.delenv("TS_TEST_MISSING_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="receiver.auth_token: environment variable TS_TEST_MISSING_TOKEN"):
        config_from_dict({"receiver": {"auth_token": "env:TS_TEST_MISSING_TOKEN"}}, env={})
    monkeypatch.setenv("TS_TEST_MISSING_TOKEN", "")
    config = config_from_dict({"receiver": {"auth_token": "env:TS_TEST_MISSING_TOKEN"}}, env={})
    assert config.receiver.token() is None


def test_auth_token_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TS_TEST_TOKEN", "s3cr3t-value")
    cfg = config_from_dict({"receiver": {"auth_token": "env:TS_TEST_TOKEN"}}, env={})
    assert cfg.receiver.token() == "s3cr3t-value"
    cfg = config_from_dict({"receiver": {"auth_token": "s3cr3t-value"}}, env={})
    assert "s3cr3t" not in repr(cfg)


def test_missing_and_broken_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[receiver\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)


def test_check_command_imports_scorers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scorer_file = tmp_path / "my_scorers.py"
    scorer_file.write_text(
        "class _S:\n    id = name = 'length'\n    version = '2'\n"
        "    async def run(self, **kw):\n        return None\n"
        "length = _S()\n"
    )
    good = tmp_path / "good.toml"
    good.write_text(f'[[scorers]]\nref = "{scorer_file}:length"\nsampling = 0.5\n')
    assert check.run(argparse.Namespace(config=str(good))) == 0
    assert "scorer length (version 2, sampling 0.5)" in capsys.readouterr().out

    bad = tmp_path / "bad.toml"
    bad.write_text(f'[[scorers]]\nref = "{scorer_file}:missing"\n')
    assert check.run(argparse.Namespace(config=str(bad))) == 2
    assert "scorers[0].ref" in capsys.readouterr().err

    not_scorer = tmp_path / "ns.toml"
    not_scorer.write_text('[[scorers]]\nref = "json:dumps"\n')
    assert check.run(argparse.Namespace(config=str(not_scorer))) == 2
    assert "is not a scorer" in capsys.readouterr().err


def test_shipped_example_config_is_valid() -> None:
    example = REPO / "deploy" / "tracescore.toml"
    # Every key of the example validates (the queue URL is overridden: the env wins over the file).
    cfg = load_config(example, env={"TRACESCORE_QUEUE_URL": "sqlite:///example.db"})
    assert cfg.queue.url == "sqlite:///example.db"


def test_scorer_labels_and_threshold_are_exclusive() -> None:
    with pytest.raises(ConfigError, match="labels or pass_threshold"):
        config_from_dict({"scorers": [{"ref": "m:q", "labels": {"a": 0.5}, "pass_threshold": 0.5}]}, env={})


def test_a_job_may_run_longer_than_its_lease_which_its_worker_renews() -> None:
    config = config_from_dict({"workers": {"job_timeout_s": 900}}, env={})
    assert config.queue.visibility_timeout_s == 20.0 and config.workers.job_timeout_s == 900


def test_judge_rate_limits_from_file_and_env() -> None:
    config = config_from_dict({"workers": {"judge_rpm_by_model": {"openai/gpt-4o": 500}}},
                              env={"TRACESCORE_WORKERS_JUDGE_RPM": "1200"})
    assert (config.workers.judge_rpm, config.workers.judge_rpm_by_model) == (1200, {"openai/gpt-4o": 500})
    assert config_from_dict({}, env={}).workers.judge_rpm == 0  # no limit unless asked


async def test_the_service_shares_the_judge_rate_limits_through_its_governor(tmp_path: Path) -> None:
    from collector.service import Service
    from collector.work.registry import ScorerRegistry
    from scorers._rate_limit import get_judge_rate_limit

    config = config_from_dict({
        "receiver": {"grpc_endpoint": "", "http_endpoint": ""},
        "queue": {"url": f"sqlite:///{tmp_path / 'q.db'}"},
        "workers": {"judge_rpm": 600, "judge_rpm_by_model": {"openai/gpt-4o": 60, "ollama/x": 0},
                    "judge_tpm": 90000},
    }, env={})
    service = Service(config, ScorerRegistry([]))
    try:
        await service.start()
        governance = service.governance
        assert [governance.rpm(m) for m in ("openai/gpt-4o", "ollama/x", "openai/gpt-4o-mini")] == [60, 0, 600]
        assert governance.tpm("openai/gpt-4o") == 90000
        assert get_judge_rate_limit("openai/gpt-4o") is None  # not a per-process limit any more
    finally:
        await service.shutdown()
