"""Service.start: what is ready before /readyz answers 200."""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.config import Config, ScorerConfig, config_from_dict
from collector.service import Service
from collector.work.registry import RegisteredScorer, ScorerRegistry
from scorers import Judge, create_scorer


def _config(tmp_path: Path) -> Config:
    return config_from_dict({
        "receiver": {"grpc_endpoint": "", "http_endpoint": "127.0.0.1:0"},
        "queue": {"url": f"sqlite:///{tmp_path / 'q.db'}"},
    }, env={})


@pytest.mark.parametrize("judged", [True, False], ids=["judge-scorer", "code-scorer"])
async def test_a_judge_scorer_has_its_judge_client_loaded_before_the_daemon_is_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, judged: bool,
) -> None:
    """litellm takes seconds to import: a fresh worker must not pay it inside its first job (a
    worker taking over a dead one's jobs would miss the take-over bound). Code scorers never load it."""
    from scorers import _judge_transport

    loaded: list[bool] = []

    async def ensure() -> None:
        loaded.append(True)

    monkeypatch.setattr(_judge_transport, "ensure_litellm", ensure)
    scorer = create_scorer(id="s", description="d").generate_score(lambda run: 1.0)
    if judged:
        judge = Judge(model="openai/gpt-4o-mini", instructions="Rate it.")
        scorer = create_scorer(id="s", description="d", judge=judge).generate_score(
            description="score", create_prompt=lambda run: "Rate this.")
    service = Service(_config(tmp_path), ScorerRegistry([RegisteredScorer(scorer, ScorerConfig(ref="x:s"))]))
    await service.start()
    try:
        assert service.is_ready() and loaded == ([True] if judged else [])
    finally:
        await service.shutdown()


def test_the_store_gets_the_session_rules_of_the_config(tmp_path: Path) -> None:
    """``[sessions]`` becomes the store's rules (a scored session is remembered for max_age_s)."""
    from collector.store.interface import SessionRules

    sessions = {"idle_s": 5.0, "max_revisions": 2, "max_age_s": 600.0, "max_turns": 9, "max_open": 77}
    expected = SessionRules(idle_s=5.0, max_age_s=600.0, max_turns=9, max_revisions=2, max_open=77, retain_s=600.0)
    sqlite = config_from_dict({**_config(tmp_path).model_dump(), "sessions": sessions}, env={})
    assert Service(sqlite, ScorerRegistry([])).store.session_rules == expected
    assert Service(_config(tmp_path), ScorerRegistry([])).store.session_rules == SessionRules()
    redis = config_from_dict({"queue": {"url": "redis://127.0.0.1:6379/0"}, "sessions": sessions}, env={})
    assert Service(redis, ScorerRegistry([])).store.session_rules == expected


@pytest.mark.parametrize(("setting", "on_loop"), [("adaptive", True), ("thread", False)])
def test_workers_sync_steps_decides_whether_quick_sync_steps_may_run_on_the_loop(
        tmp_path: Path, setting: str, on_loop: bool) -> None:
    from scorers import _sync_calls

    config = config_from_dict({**_config(tmp_path).model_dump(), "workers": {"sync_steps": setting}}, env={})
    try:
        Service(config, ScorerRegistry([]))
        assert _sync_calls._on_loop_allowed is on_loop
    finally:
        _sync_calls.allow_sync_calls_on_loop(True)
