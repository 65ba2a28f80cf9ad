"""The public surface of `scorers`: a flat, grouped ``__all__`` and no litellm at import."""

from __future__ import annotations

import subprocess
import sys

import scorers

EXPECTED = {
    # builder
    "create_scorer", "Scorer",
    # run / result
    "ScorerRun", "ConversationRun", "ScorerResult", "StepResults", "NotScorable", "not_scorable",
    # steps
    "PromptStep",
    # judge
    "Judge", "JudgeExecution", "JudgeStepRecord", "JudgeUsage", "merge_judges",
    "set_judge_concurrency", "set_judge_rate_limit", "StreamErrorRetryProcessor", "PIIRedactor",
    # agent types
    "Message", "ScorerRunInputForAgent", "ScorerRunOutputForAgent", "ToolCall", "TextPart",
    "ReasoningPart", "ToolCallPart", "ToolResultPart", "FilePart", "OtherPart",
    # helpers
    "filter_run", "RunFilter",
    # errors
    "ScorerError", "ScorerDefinitionError", "ScorerInputError", "ScorerRunError", "JudgeError",
    "JudgeOutputError", "JudgeCredentialsError",
}  # fmt: skip


def test_all_lists_exactly_the_public_names() -> None:
    assert set(scorers.__all__) == EXPECTED
    assert len(scorers.__all__) == len(set(scorers.__all__))


def test_every_exported_name_has_a_docstring_with_an_example() -> None:
    import scorers.utils as utils

    for module in (scorers, utils):
        for name in module.__all__:
            doc = getattr(module, name).__doc__ or ""
            assert ">>>" in doc, f"{module.__name__}.{name} has no runnable example"


def test_exported_names_come_from_private_modules_or_errors() -> None:
    for name in scorers.__all__:
        module = getattr(getattr(scorers, name), "__module__", "scorers._x")
        if module is None:  # type aliases have no module of their own
            continue
        assert module.startswith(("scorers._", "scorers.errors", "typing", "collections")), name


def test_importing_scorers_does_not_import_litellm() -> None:
    code = (
        "import sys, scorers, scorers.utils\n"
        "assert 'litellm' not in sys.modules, 'litellm imported'\n"
        "assert 'openai' not in sys.modules, 'openai imported'\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_utils_exports_the_mastra_helpers() -> None:
    import scorers.utils as utils

    expected = {
        "get_user_message", "get_assistant_message", "get_system_messages",
        "get_combined_system_prompt", "get_reasoning", "extract_tool_calls",
        "extract_tool_results", "extract_input_messages", "extract_agent_response_messages",
        "get_text_content", "round_to_two_decimals", "make_agent_run", "make_message",
        "make_tool_call", "ExtractedToolCalls", "ToolCallInfo", "ToolResultInfo",
    }  # fmt: skip
    assert set(utils.__all__) == expected
