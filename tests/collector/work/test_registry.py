"""Scorer refs, deterministic sampling and filters."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from collector.common.errors import ConfigError
from collector.config import FilterConfig, ScorerConfig
from collector.work.registry import ScorerRegistry, matches, sampled
from collector.work.scorer_ref import load_ref


def test_load_ref_module_and_file(tmp_path: Path) -> None:
    assert load_ref("json:dumps").__name__ == "dumps"
    assert load_ref("os.path:join").__name__ == "join"
    src = tmp_path / "user_scorers.py"
    src.write_text("class A:\n    class B:\n        value = 42\n")
    assert load_ref(f"{src}:A.B").value == 42
    with pytest.raises(ConfigError, match="file not found"):
        load_ref(f"{tmp_path}/nope.py:x")
    with pytest.raises(ConfigError, match="import failed"):
        load_ref("no_such_module_xyz:x")
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('bad import')\n")
    with pytest.raises(ConfigError, match="bad import"):
        load_ref(f"{broken}:x")
    with pytest.raises(ConfigError, match="expected module:attribute"):
        load_ref("nocolon")


def test_sampling_is_deterministic_and_proportional() -> None:
    ids = [secrets.token_hex(16) for _ in range(4000)]
    kept = [t for t in ids if sampled(t, 0.25)]
    assert 800 < len(kept) < 1200
    assert kept == [t for t in ids if sampled(t, 0.25)]
    # a larger ratio keeps a superset
    assert set(kept) <= {t for t in ids if sampled(t, 0.5)}
    import hashlib

    t = "0af7651916cd43dd8448eb211c80319c"
    value = int.from_bytes(hashlib.sha256(bytes.fromhex(t)).digest()[:6], "big") / 2**48
    assert sampled(t, value + 1e-9) and not sampled(t, value)


def test_filters() -> None:
    f = FilterConfig(service="bot", agent="helper", span_name="invoke_agent helper",
                     attributes={"env": "prod", "tier": 2})
    assert matches(f, "bot", "helper", "invoke_agent helper", {"env": "prod", "tier": 2, "x": 1})
    assert not matches(f, "bot", "other", "invoke_agent helper", {"env": "prod", "tier": 2})
    assert not matches(f, "bot", "helper", "invoke_agent helper", {"env": "dev", "tier": 2})
    assert not matches(f, "bot", "helper", "chat", {"env": "prod", "tier": 2})
    assert matches(FilterConfig(), "", None, "", {})


def test_registry_rejects_duplicates(tmp_path: Path) -> None:
    src = tmp_path / "dup_scorers.py"
    src.write_text(
        "class S:\n    def __init__(self, i, v):\n        self.id = self.name = i\n        self.version = v\n"
        "    async def run(self, **kw):\n        return None\n"
        "a = S('q', '1')\nb = S('q', '1')\nc = S('q', '2')\n"
    )
    reg = ScorerRegistry.load([ScorerConfig(ref=f"{src}:a"), ScorerConfig(ref=f"{src}:c")])
    assert reg.get("q", "2") is reg.entries[1]
    with pytest.raises(ConfigError, match="share id"):
        ScorerRegistry.load([ScorerConfig(ref=f"{src}:a"), ScorerConfig(ref=f"{src}:b")])
