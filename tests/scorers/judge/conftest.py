"""Fixtures for judge tests: a real OpenAI-compatible HTTP server on 127.0.0.1 (port 0).

The server module lives in ``tests/support/llm_server.py`` and is loaded by path (tests
are not a package; see `judge_support`), so other test folders and the benchmark can
load it the same way.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from judge_support import llm_server


@pytest.fixture
async def server() -> AsyncIterator[Any]:
    """A started `LLMTestServer`; the judge's shared HTTP session is closed afterwards."""
    from scorers._judge_transport import aclose_judge_clients

    srv = await llm_server.LLMTestServer().start()
    try:
        yield srv
    finally:
        await aclose_judge_clients()
        await srv.stop()


@pytest.fixture
def settings(server: Any) -> dict[str, Any]:
    """``model_settings`` pointing a judge at the test server."""
    return {"api_base": server.url + "/v1", "api_key": "test-key"}


@pytest.fixture(params=["fast", "litellm"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test over both transports: the shared aiohttp path and ``litellm.acompletion``."""
    from scorers import _judge_transport

    monkeypatch.setattr(_judge_transport, "_routes", {})
    if request.param == "litellm":
        monkeypatch.setattr(_judge_transport, "FAST_PROVIDERS", frozenset())
    return str(request.param)
