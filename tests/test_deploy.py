"""The shipped deployment files use the configuration keys, roles and scorer refs that exist."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from collector.commands.arguments import serve
from collector.common.errors import ConfigError
from collector.config import load_config
from collector.work.registry import ScorerRegistry
from scorers.utils import make_agent_run

DEPLOY = Path(__file__).parents[1] / "deploy"


def test_scale_out_config_is_valid_and_its_example_scorer_loads(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    text = (DEPLOY / "tracescore.scale.toml").read_text()
    # In the containers the example scorer is mounted at /etc/tracescore; here it is in deploy/.
    local = tmp_path / "tracescore.scale.toml"
    local.write_text(text.replace("/etc/tracescore/example_scorers.py", str(DEPLOY / "example_scorers.py")))
    monkeypatch.delenv("TRACESCORE_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="TRACESCORE_TOKEN is not set"):  # never starts open
        load_config(local, env={})
    monkeypatch.setenv("TRACESCORE_TOKEN", "s3cret")
    config = load_config(local, env={})
    assert config.queue.url.startswith("redis://")
    assert config.receiver.grpc_endpoint == "0.0.0.0:4317"
    assert config.receiver.token() == "s3cret"
    monkeypatch.setenv("TRACESCORE_TOKEN", "")
    assert config.receiver.token() is None
    registry = ScorerRegistry.load(config.scorers)
    [entry] = registry.entries
    result = entry.scorer.run_sync(make_agent_run("Capital of France?", "Paris."))
    assert result.score == 1.0


@pytest.mark.parametrize(
    "name", ["docker-compose.scale.yml", "kubernetes/redis/tracescore.yaml", "docker-compose.yml",
             "docker-compose.sentinel.yml"]
)
def test_roles_named_in_deploy_files_exist(name: str) -> None:
    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    roles = {action.dest: action.choices for action in parser._actions}["role"]
    assert roles is not None
    named = re.findall(r'"--role",\s*"([a-z]+)"', (DEPLOY / name).read_text())
    assert set(named) <= set(roles)
    if "scale" in name or "kubernetes" in name or "sentinel" in name:
        assert {"receiver", "worker"} <= set(named)


def _image_env() -> dict[str, str]:
    """The TRACESCORE_* variables the Dockerfile bakes into the image."""
    return dict(re.findall(r"\b(TRACESCORE_[A-Z_]+)=(\S+)", (DEPLOY / "Dockerfile").read_text()))


def test_the_image_environment_keeps_a_redis_config_on_redis(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    """Environment variables override the file: one baked into the image must not turn the
    scale-out config (compose and Kubernetes) back into an embedded queue, which both roles refuse."""
    monkeypatch.setenv("TRACESCORE_TOKEN", "")
    local = tmp_path / "tracescore.scale.toml"
    local.write_text((DEPLOY / "tracescore.scale.toml").read_text())
    config = load_config(local, env=_image_env())
    assert config.queue.url.startswith("redis://")
    assert config.receiver.grpc_endpoint == "0.0.0.0:4317"


def test_every_compose_service_of_the_shared_config_sets_its_token_variable() -> None:
    """The scale config reads auth_token from env:TRACESCORE_TOKEN; a service without the
    variable would refuse to start (an unset token variable is an error, not auth off)."""
    text = (DEPLOY / "docker-compose.scale.yml").read_text()
    services = re.split(r"\n  (?=tracescore-)", text)[1:]
    assert len(services) == 2
    assert all("TRACESCORE_TOKEN" in service for service in services)


def test_the_example_configuration_shows_every_key() -> None:
    """The README says every configuration key is shown, with its default, in deploy/tracescore.toml."""
    import tomllib

    from collector.config import Config

    data = tomllib.loads((DEPLOY / "tracescore.toml").read_text())
    for section, field in Config.model_fields.items():
        if section == "scorers":
            continue
        model = field.annotation
        assert model is not None
        shown = data.get(section, {})
        keys = {f.alias or name: name for name, f in model.model_fields.items()}  # [labels] from: field sources
        assert set(keys) == set(shown), section
        defaults = model()
        for key, value in shown.items():  # each shown value is the default
            assert getattr(model.model_validate({key: value}), keys[key]) == getattr(defaults, keys[key]), (section, key)
