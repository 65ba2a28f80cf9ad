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


def test_instructions_file_replaces_the_judges_instructions_and_bad_ones_are_config_errors(tmp_path: Path) -> None:
    ref = f"{Path(__file__).parents[2] / 'integration' / 'scorers_for_tests.py'}:judged"
    adopted = tmp_path / "helpful.toml"
    adopted.write_text('instructions = """Judge only whether the answer helps.\nBe strict."""\n')
    (base,) = ScorerRegistry.load([ScorerConfig(ref=ref)]).entries
    (entry,) = ScorerRegistry.load([ScorerConfig(ref=ref, instructions_file=str(adopted), few_shot=3)]).entries
    assert base.judges == (("openai/gpt-4o-mini", "Rate how helpful the answer is."),)
    assert entry.judges == (("openai/gpt-4o-mini", "Judge only whether the answer helps.\nBe strict."),)
    assert entry.judge_revision != base.judge_revision  # a new agreement series
    assert entry.scorer.get_judges()[0].model_settings == base.scorer.get_judges()[0].model_settings

    def refused(config: ScorerConfig) -> str:
        with pytest.raises(ConfigError) as caught:
            ScorerRegistry.load([ScorerConfig(ref=ref), config])  # its index is named: 1
        return str(caught.value)

    for text, why in (('instruction = "typo"\n', "has no string `instructions`"),
                      ("instructions = 3\n", "has no string `instructions`"),
                      ('instructions = "  "\n', "has no string `instructions`"),
                      ("instructions = \n", "is not valid TOML")):
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        assert refused(ScorerConfig(ref=ref, instructions_file=str(bad))).startswith(
            f"scorers[1].instructions_file: {bad} {why}")
    missing = tmp_path / "nope.toml"
    assert refused(ScorerConfig(ref=ref, instructions_file=str(missing))) == (
        f"scorers[1].instructions_file: file not found: {missing}")
    code = f"{Path(__file__).parents[2] / 'integration' / 'scorers_for_tests.py'}:answer_length"
    for key, config in (("instructions_file", ScorerConfig(ref=code, instructions_file=str(adopted))),
                        ("few_shot", ScorerConfig(ref=code, few_shot=3))):
        assert refused(config) == (f"scorers[1].{key}: scorer 'answer-length' has no LLM judge (no prompt step)"
                                   " to give instructions or examples to")
