"""The shipped deployment files use the configuration keys, roles and scorer refs that exist."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from collector.commands import serve
from collector.config import load_config
from collector.errors import ConfigError
from collector.registry import ScorerRegistry
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
    "name", ["docker-compose.scale.yml", "kubernetes/tracescore.yaml", "docker-compose.yml"]
)
def test_roles_named_in_deploy_files_exist(name: str) -> None:
    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    roles = {action.dest: action.choices for action in parser._actions}["role"]
    assert roles is not None
    named = re.findall(r'"--role",\s*"([a-z]+)"', (DEPLOY / name).read_text())
    assert set(named) <= set(roles)
    if "scale" in name or "kubernetes" in name:
        assert {"receiver", "worker"} <= set(named)
