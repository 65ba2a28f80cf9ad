"""The compose sample scores out of the box: its tracescore configuration (example scorers
mounted and configured) scores the runs the bundled sample agent sends, with the agent's
own OTLP exporter, and exports the scores (here to a capturing backend in Phoenix's place)."""

from __future__ import annotations

import asyncio
import os
import sys
import tomllib
from collections import Counter
from pathlib import Path

from daemon_harness import CaptureBackend, free_port, wait_until

from collector.config import config_from_dict
from collector.service import Service
from collector.work.registry import ScorerRegistry

DEPLOY = Path(__file__).parents[2] / "deploy"


async def test_the_sample_agent_is_scored_by_the_compose_configuration(tmp_path: Path) -> None:
    data = tomllib.loads((DEPLOY / "tracescore.compose.toml").read_text())
    backend = await CaptureBackend().start()
    grpc_port = free_port()
    # As in the container, but on loopback, a temporary queue, a capturing backend, no waiting.
    data["receiver"] = {"grpc_endpoint": f"127.0.0.1:{grpc_port}", "http_endpoint": "127.0.0.1:0"}
    data["queue"] = {"url": f"sqlite:///{tmp_path / 'queue.db'}"}
    data["assembly"] = {"decision_wait": 0.3}
    data["export"] = {**data["export"], "endpoint": backend.endpoint}
    for scorer in data["scorers"]:
        scorer["ref"] = scorer["ref"].replace("/etc/tracescore/", f"{DEPLOY}/")
    config = config_from_dict(data, env={})
    registry = await asyncio.to_thread(ScorerRegistry.load, config.scorers)
    service = await asyncio.to_thread(Service, config, registry)
    await service.start()
    try:
        env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{grpc_port}",
               "OTEL_EXPORTER_OTLP_INSECURE": "true"}
        agent = await asyncio.create_subprocess_exec(
            sys.executable, str(DEPLOY / "sample_agent.py"), "--count", "4", "--interval", "0", env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(agent.communicate(), 60)
        assert agent.returncode == 0, err.decode()
        assert out.decode().count("sent run") == 4
        await wait_until(lambda: len(backend.scores()) == 8, timeout=30, what="two scores per sample run")
        values = Counter((s.attributes["tracescore.scorer.id"], s.attributes["gen_ai.evaluation.score.value"])
                         for s in backend.scores())
        assert values[("answer-length", 1.0)] == 2 and values[("answer-length", 0.0)] == 2  # long and empty
        assert sum(n for (scorer, _), n in values.items() if scorer == "completeness") == 4
        assert {s.service for s in backend.forwarded()} == {"sample-agent"}  # the agent's spans go on too
    finally:
        await service.shutdown()
        await backend.stop()
