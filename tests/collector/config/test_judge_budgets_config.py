"""``[judge]`` and ``[judge.budgets]`` (SPEC §8): defaults, windows at 00:00 UTC, the scopes a
call falls under, env overrides, the README's example, and `check` refusing an unpriced
judge under a budget."""

from __future__ import annotations

import re
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from collector.cli import main
from collector.common.errors import ConfigError
from collector.config import BudgetsConfig, config_from_dict

README = Path(__file__).parents[3] / "README.md"


def _at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_defaults_are_the_specs() -> None:
    judge = config_from_dict({}, env={}).judge
    assert (judge.probe_interval_s, judge.max_park_s, judge.unpriced) == (60.0, 86400.0, "refuse")
    b = judge.budgets
    assert (b.usd, b.window, b.by_scorer, b.by_model, b.default_output_tokens) == (0.0, "1d", {}, {}, 1024)
    assert not b.enabled and b.limits("relevance", "openai/gpt-4o") == []


@pytest.mark.parametrize(("window", "at", "name", "ends"), [
    ("1d", "2026-12-05T23:59:59", "1d:2026-12-05", "2026-12-06T00:00:00"),
    ("1d", "2026-12-06T00:00:00", "1d:2026-12-06", "2026-12-07T00:00:00"),
    ("week", "2026-12-06T12:00:00", "week:2026-11-30", "2026-12-07T00:00:00"),  # Sunday: Monday's week
    ("week", "2026-12-07T00:00:00", "week:2026-12-07", "2026-12-14T00:00:00"),
    ("7d", "2026-12-05T08:00:00", "7d:2026-12-03", "2026-12-10T00:00:00"),  # 7-day blocks from 1970-01-01
    ("30d", "2026-12-05T08:00:00", "30d:2026-12-03", "2027-01-02T00:00:00"),
])
def test_windows_reset_at_midnight_utc(window: str, at: str, name: str, ends: str) -> None:
    assert BudgetsConfig(window=window).window_of(_at(at)) == (name, _at(ends))


def test_a_call_falls_under_the_global_its_scorers_and_its_models_budgets() -> None:
    b = BudgetsConfig(usd=10, by_scorer={"relevance": 2, "tone": 0}, by_model={"openai/gpt-4o": 3})
    assert b.limits("relevance", "openai/gpt-4o") == [("global", 10), ("scorer:relevance", 2), ("model:openai/gpt-4o", 3)]
    assert b.limits("tone", "openai/gpt-4o-mini") == [("global", 10)]  # 0: no limit
    assert BudgetsConfig(by_model={"m": 1}).limits(None, "x") == []


def test_env_sets_budgets_and_bad_values_name_their_key() -> None:
    cfg = config_from_dict({}, env={"TRACESCORE_JUDGE_BUDGETS_USD": "0.05", "TRACESCORE_JUDGE_PROBE_INTERVAL_S": "2",
                                    "TRACESCORE_JUDGE_BUDGETS_BY_SCORER": "{ relevance = 1.5 }",
                                    "TRACESCORE_WORKERS_JUDGE_TPM": "1000"})
    assert (cfg.judge.budgets.usd, cfg.judge.probe_interval_s, cfg.judge.budgets.by_scorer) == (0.05, 2.0, {"relevance": 1.5})
    assert cfg.workers.judge_tpm == 1000
    with pytest.raises(ConfigError, match="judge.budgets.window"):
        config_from_dict({"judge": {"budgets": {"window": "2d"}}}, env={})
    with pytest.raises(ConfigError, match="judge.budgets.usd"):
        config_from_dict({"judge": {"budgets": {"usd": -1}}}, env={})


def test_the_readme_example_is_a_valid_configuration() -> None:
    section = README.read_text().split("### Judge spend and rate", 1)[1]
    (block,) = re.findall(r"```toml\n(.*?)```", section.split("```sh", 1)[0], re.S)
    cfg = config_from_dict(tomllib.loads(block), env={})
    assert cfg.judge.budgets.limits("relevance", "openai/gpt-4o") == [
        ("global", 20.0), ("scorer:relevance", 5.0), ("model:openai/gpt-4o", 10.0)]
    assert cfg.workers.judge_rpm_by_model == {"openai/gpt-4o": 60}


UNPRICED = '''
from scorers import Judge, create_scorer
judged = create_scorer(id="judged", description="d", type="agent",
                       judge=Judge(model="{model}", instructions="Grade.", model_settings={{"api_base": "http://127.0.0.1:9/v1", "api_key": "k"}})
                       ).generate_score(description="score", create_prompt=lambda run: "score it")
'''


@pytest.mark.parametrize(("model", "extra", "code"), [
    ("hosted_vllm/my-local-model", "", 2),  # no price, under a budget: refused
    ("hosted_vllm/my-local-model", 'unpriced = "allow"\n', 0),
    ("openai/gpt-4o-mini", "", 0),  # litellm prices it
])
def test_check_refuses_an_unpriced_judge_under_a_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       model: str, extra: str, code: int) -> None:
    (tmp_path / "judged.py").write_text(UNPRICED.format(model=model))
    config = tmp_path / "ts.toml"
    config.write_text(f"[judge]\n{extra}[judge.budgets]\nusd = 1.0\n[[scorers]]\nref = \"{tmp_path / 'judged.py'}:judged\"\n")
    assert main(["check", str(config)]) == code
    captured = capsys.readouterr()
    if code == 2:
        assert f"judge model '{model}' has no known price" in captured.err and 'unpriced = "allow"' in captured.err
    else:
        assert "judge budget global: 1 USD per 1d" in captured.out
