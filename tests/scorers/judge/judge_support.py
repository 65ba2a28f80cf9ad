"""Shared helpers of the judge tests (a uniquely named module: ``from conftest import`` would
pick whichever conftest.py comes first on sys.path)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

_SERVER_PATH = Path(__file__).resolve().parents[2] / "support" / "llm_server.py"


def load_llm_server() -> Any:
    """The ``tests/support/llm_server.py`` module (loaded once, by path)."""
    name = "tracescore_test_llm_server"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, _SERVER_PATH)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


llm_server = load_llm_server()
Reply = llm_server.Reply

SCORE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"score": {"type": "number"}},
    "required": ["score"],
}
