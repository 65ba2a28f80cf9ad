"""Fixtures of the built-in scorer tests: the fake judge server and a judge pointed at it."""

from __future__ import annotations

from typing import Any

import pytest

from scorers import Judge


@pytest.fixture
def judge(server: Any) -> Judge:
    """A judge (no instructions: each scorer brings its own) talking to the test server."""
    return Judge(model="openai/gpt-4o-mini",
                 model_settings={"api_base": server.url + "/v1", "api_key": "test-key"})
