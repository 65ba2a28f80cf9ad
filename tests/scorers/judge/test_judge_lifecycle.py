"""Timeouts, the shared HTTP session's lifetime across event loops, lazy litellm."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from judge_support import Reply

from scorers._judge import execute_judge_call
from scorers._judge_types import Judge
from scorers.errors import JudgeError
from scorers.processors import StreamErrorRetryProcessor

ROOT = Path(__file__).resolve().parents[3]


async def test_timeout_is_litellm_timeout_and_retryable(server: Any, settings: dict[str, Any],
                                                        transport: str) -> None:
    import litellm

    server.script(Reply.text("late", latency_ms=400))
    judge = Judge(model="openai/gpt-4o-mini", instructions="i",
                  model_settings={**settings, "timeout": 0.05})
    with pytest.raises(JudgeError) as caught:
        await execute_judge_call(judge, "p", output_schema=None)
    assert isinstance(caught.value.__cause__, litellm.Timeout)
    assert caught.value.retryable is True and caught.value.status_code == 408
    assert len(server.requests) == 1


async def test_timeout_is_retried_by_the_retry_processor(server: Any, settings: dict[str, Any]) -> None:
    server.script(Reply.text("late", latency_ms=400), Reply.text("on time"))
    judge = Judge(model="openai/gpt-4o-mini", instructions="i",
                  model_settings={**settings, "timeout": 0.05},
                  error_processors=[StreamErrorRetryProcessor()])
    value, execution = await execute_judge_call(judge, "p", output_schema=None)
    assert value == "on time" and len(server.requests) == 2
    assert (execution.attempt_count, execution.model_call_count, execution.request_count) == (1, 1, 2)


def run_in_fresh_process(body: str, *python_flags: str) -> subprocess.CompletedProcess[str]:
    """Run ``body`` in a new interpreter where ``scorer`` is a prompt-mode score scorer whose
    judge is a test LLM server (itself a subprocess)."""
    head = textwrap.dedent(
        f"""
        import asyncio, gc, subprocess, sys
        server = subprocess.Popen([sys.executable, {str(ROOT / "tests/support/llm_server.py")!r}],
                                  stdout=subprocess.PIPE, text=True)
        try:
            port = int(server.stdout.readline())
            from scorers import Judge, create_scorer
            judge = Judge(model="openai/gpt-4o-mini", instructions="i",
                          model_settings={{"api_base": f"http://127.0.0.1:{{port}}/v1", "api_key": "k"}})
            scorer = create_scorer(id="x", description="d", judge=judge).generate_score(
                description="s", create_prompt=lambda run: "score")
        """
    )
    tail = "finally:\n    server.terminate()\n    server.wait()\n    server.stdout.close()\n"
    script = head + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n" + tail
    return subprocess.run([sys.executable, *python_flags, "-c", script], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)


FRESH_PROCESS_BODY = """
    from blockbuster import blockbuster_ctx

    async def main():
        with blockbuster_ctx(["scorers"]):
            return (await scorer.run(input="a", output="b")).score

    print("first prompt score:", asyncio.run(main()))
    print("run_sync twice:", scorer.run_sync(input="a", output="b").score, scorer.run_sync(input="a", output="b").score)
    gc.collect()
    """


@pytest.fixture(scope="module")
def fresh_process() -> subprocess.CompletedProcess[str]:
    """One fresh interpreter (``-X dev``: unclosed resources are reported) for both tests below:
    its first prompt score, under BlockBuster, then two ``run_sync`` calls (each on an event loop
    of its own). A fresh process imports litellm (seconds of CPU): one serves both."""
    return run_in_fresh_process(FRESH_PROCESS_BODY, "-X", "dev")


def printed(proc: subprocess.CompletedProcess[str], label: str) -> str:
    """What the fresh process printed after ``label: `` (it exited 0)."""
    assert proc.returncode == 0, proc.stderr
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith(f"{label}: ")]
    return line.removeprefix(f"{label}: ")


def test_run_sync_twice_leaves_no_unclosed_session(fresh_process: subprocess.CompletedProcess[str]) -> None:
    assert printed(fresh_process, "run_sync twice") == "0.5 0.5"
    assert "Unclosed" not in fresh_process.stderr, fresh_process.stderr


def test_a_first_prompt_score_blocks_no_event_loop(fresh_process: subprocess.CompletedProcess[str]) -> None:
    """The default generate_score schema is a JSON Schema dict: validating it needs jsonschema,
    imported off the event loop on first use (BlockBuster, on for scorers, in a fresh process)."""
    assert printed(fresh_process, "first prompt score") == "0.5"
