"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import llm_server  # tests/support (pytest pythonpath): the fake OpenAI-compatible server

# Hypothesis times each example (200 ms by default) and fails "unreliable timings" when a slow
# run is fast when repeated; it also fails a test whose data generation is slow. Both measure
# the machine, not the code: a loaded one (parallel workers, a CPU burner) trips them. Every
# property test here checks values, never speed.
settings.register_profile("tracescore", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("tracescore")


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


@pytest.fixture
async def langfuse() -> AsyncIterator[Any]:
    """A started loopback stand-in for Langfuse's public API (`langfuse_server.LangfuseServer`)."""
    from langfuse_server import LangfuseServer  # tests/support

    server = await LangfuseServer().start()
    try:
        yield server
    finally:
        await server.stop()
