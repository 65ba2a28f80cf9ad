"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import llm_server  # tests/support (pytest pythonpath): the fake OpenAI-compatible server


@pytest.fixture
async def server() -> AsyncIterator[Any]:
    """A started fake LLM server; the judge's shared HTTP session is closed afterwards."""
    from scorers._judge_transport import aclose_judge_clients

    srv = await llm_server.LLMTestServer().start()
    try:
        yield srv
    finally:
        await aclose_judge_clients()
        await srv.stop()
