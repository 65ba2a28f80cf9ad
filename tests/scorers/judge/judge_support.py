"""Shared helpers of the judge tests (a uniquely named module: ``from conftest import`` would
pick whichever conftest.py comes first on sys.path)."""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import llm_server  # tests/support (pytest pythonpath): the fake OpenAI-compatible server

Reply = llm_server.Reply

SCORE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"score": {"type": "number"}},
    "required": ["score"],
}
