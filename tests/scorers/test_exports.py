"""The public surface of `scorers`: a flat, grouped ``__all__`` and no litellm at import."""

from __future__ import annotations

import subprocess
import sys

import scorers

EXPECTED = {
    # builder
    "create_scorer", "Scorer",
    # run / result
    "ScorerRun", "ScorerResult", "StepResults", "NotScorable", "not_scorable",
    # steps
    "PromptStep",
    # judge
    "Judge", "JudgeExecution", "JudgeStepRecord", "JudgeUsage", "merge_judges",
    # agent types
    "Message", "ScorerRunInputForAgent", "ScorerRunOutputForAgent", "ToolCall", "TextPart",
    "ReasoningPart", "ToolCallPart", "ToolResultPart", "FilePart", "OtherPart",
    # errors
    "ScorerError", "ScorerDefinitionError", "ScorerInputError", "ScorerRunError", "JudgeError",
    "JudgeOutputError",
}  # fmt: skip


def test_all_lists_exactly_the_public_names() -> None:
    assert set(scorers.__all__) == EXPECTED
    assert len(scorers.__all__) == len(set(scorers.__all__))


def test_every_exported_name_exists_and_is_documented() -> None:
    for name in scorers.__all__:
        obj = getattr(scorers, name)
        assert obj.__doc__, name


def test_exported_names_come_from_private_modules_or_errors() -> None:
    for name in scorers.__all__:
        module = getattr(getattr(scorers, name), "__module__", "scorers._x")
        if module is None:  # type aliases have no module of their own
            continue
        assert module.startswith(("scorers._", "scorers.errors", "typing", "collections")), name


def test_importing_scorers_does_not_import_litellm() -> None:
    code = (
        "import sys, scorers\n"
        "assert 'litellm' not in sys.modules, 'litellm imported'\n"
        "assert 'openai' not in sys.modules, 'openai imported'\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
