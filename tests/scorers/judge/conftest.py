"""Fixtures for judge tests. The fake OpenAI-compatible server (``tests/support/llm_server.py``)
and its ``server`` fixture come from ``tests/conftest.py``."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def settings(server: Any) -> dict[str, Any]:
    """``model_settings`` pointing a judge at the test server."""
    return {"api_base": server.url + "/v1", "api_key": "test-key"}


@pytest.fixture(params=["fast", "litellm"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test over both transports: the shared aiohttp path and ``litellm.acompletion``."""
    from scorers import _judge_route

    monkeypatch.setattr(_judge_route, "_routes", {})
    if request.param == "litellm":
        monkeypatch.setattr(_judge_route, "FAST_PROVIDERS", frozenset())
    return str(request.param)
