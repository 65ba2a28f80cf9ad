"""The README's python examples run as written: the first scorer prints what the README says, and
the judges on your own endpoint send their requests there."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest
from llm_server import Reply

from scorers.utils import make_agent_run, make_message

README = Path(__file__).resolve().parent.parent / "README.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def run_readme() -> tuple[dict[str, Any], str]:
    """Every python block of the README, run in one namespace as a reader would: the names it
    defines and what it printed."""
    code = blocks("python")
    assert code, "README has no python block"
    namespace: dict[str, Any] = {"__name__": "readme"}
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        exec(compile("\n".join(code), str(README), "exec"), namespace)
    return namespace, stdout.getvalue()


def test_readme_names_the_two_setup_commands() -> None:
    shell = "\n".join(blocks("sh"))
    assert "make demo" in shell and "make test" in shell


def test_readme_python_example_runs_and_prints_the_documented_output() -> None:
    _, printed = run_readme()
    (expected,) = blocks("text")
    assert printed == expected


def test_readme_conversation_scorer_scores_the_documented_session() -> None:
    readme, _ = run_readme()
    session = readme["session"]
    assert [m.content for m in session.input.input_messages] == ["Where is order 42?", "Where is order 42?"]
    assert [e["role"] for e in session.conversation] == ["user", "assistant", "user", "assistant"]
    assert [e["trace_id"] for e in session.conversation] == ["1" * 32] * 2 + ["2" * 32] * 2
    assert readme["session_result"].score == 0.0
    turns = session.turns
    assert readme["asked_twice"].run_sync(turns, session_id="chat-7").score == 0.0


@pytest.mark.parametrize(("judge", "path", "model"), [
    ("vllm_judge", "/v1/chat/completions", "Qwen/Qwen2.5-7B-Instruct"),
    ("ollama_judge", "/api/generate", "llama3.1"),
    ("gateway_judge", "/v1/chat/completions", "gpt-4o-mini"),
])
async def test_readme_judges_on_your_own_endpoint_send_there(server: Any, monkeypatch: pytest.MonkeyPatch,
                                                             judge: str, path: str, model: str) -> None:
    """Issue 19 (6): the README's own-endpoint judges (vLLM, Ollama, a gateway with its key), with
    their endpoints set the README's way, score a run through the README's scorer."""
    monkeypatch.setenv("VLLM_API_BASE", server.url + "/v1")
    monkeypatch.setenv("OLLAMA_API_BASE", server.url)
    monkeypatch.setenv("GATEWAY_API_BASE", server.url + "/v1")
    monkeypatch.setenv("GATEWAY_API_KEY", "gateway-key")
    readme, _ = run_readme()
    scorer = readme["local_relevance"] if judge == "vllm_judge" else readme["relevance_on"](readme[judge])
    server.script(Reply.json({"score": 0.75}))
    result = await scorer.run(make_agent_run("Where is my parcel?", [make_message("It ships today.", role="assistant")]))
    assert result.score == 0.75
    (request,) = server.requests
    assert (request.path, request.body["model"]) == (path, model)
    assert "Answer: It ships today." in (request.body.get("prompt") or request.message_text("user"))
    if judge == "gateway_judge":
        assert request.headers["Authorization"] == "Bearer gateway-key"
