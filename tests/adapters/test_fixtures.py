"""Every shared real capture (protobuf and OTLP/JSON) comes out exactly as its ground truth."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from adapters_support import FIXTURES, norm_expected, norm_run, runs_from_files

from scorers._agent_types import ScorerRunInputForAgent, ScorerRunOutputForAgent


def _cases() -> list[tuple[Path, Path, Path | None]]:
    cases = []
    for expected in sorted(FIXTURES.glob("*/*.expected.json")):
        base = str(expected)[: -len(".expected.json")]
        for suffix in (".pb", ".json", ".otlp.json"):
            trace = Path(base + suffix)
            if trace.exists():
                logs = Path(base + ".logs" + (".json" if "json" in suffix else ".pb"))
                cases.append((expected, trace, logs if logs.exists() else None))
    return cases


CASES = _cases()


def test_every_variant_has_a_case() -> None:
    variants = {c[1].parent.name for c in CASES}
    assert {"openai-v2", "openai-v2-events", "openinference-openai", "traceloop", "traceloop-legacy",
            "pydantic-ai", "openai-agents", "mastra"} <= variants


@pytest.mark.parametrize(
    ("expected", "trace", "logs"), CASES, ids=[f"{c[1].parent.name}/{c[1].name}" for c in CASES]
)
def test_fixture_matches_ground_truth(expected: Path, trace: Path, logs: Path | None) -> None:
    exp = json.loads(expected.read_text())
    runs = runs_from_files(trace, logs)
    assert len(runs) == 1
    assert norm_run(runs[0]) == norm_expected(exp)
    assert runs[0].input.tagged_system_messages == {}


@pytest.mark.parametrize(
    ("expected", "trace", "logs"),
    [c for c in CASES if c[2] is not None],
    ids=[f"{c[1].parent.name}/{c[1].name}" for c in CASES if c[2] is not None],
)
def test_log_carried_content_is_empty_without_logs(expected: Path, trace: Path, logs: Path | None) -> None:
    runs = runs_from_files(trace)
    for run in runs:
        assert all(not m.content for m in run.input.input_messages)
        assert all(not m.content for m in run.output)


@pytest.mark.parametrize(("expected", "trace", "logs"), CASES, ids=[f"{c[1].parent.name}/{c[1].name}" for c in CASES])
def test_models_equal_their_json_form_validated_again(expected: Path, trace: Path, logs: Path | None) -> None:
    # A job scored in the daemon that decided it gets the adapters' models; read back from the
    # store (another process, a retry) it validates the JSON form: the scorer sees the same run.
    for run in runs_from_files(trace, logs):
        assert ScorerRunInputForAgent.model_validate(run.input.model_dump(mode="json")) == run.input
        assert ScorerRunOutputForAgent.model_validate(run.output.model_dump(mode="json")) == run.output
