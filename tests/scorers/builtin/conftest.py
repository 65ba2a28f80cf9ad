"""Fixtures of the built-in scorer tests: the fake judge server and a judge pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from builtin_support import llm_server

from scorers import Judge


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
def judge(server: Any) -> Judge:
    """A judge (no instructions: each scorer brings its own) talking to the test server."""
    return Judge(model="openai/gpt-4o-mini",
                 model_settings={"api_base": server.url + "/v1", "api_key": "test-key"})
