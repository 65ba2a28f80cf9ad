"""Issue 19, point 4: a judge without credentials, or whose credentials the provider refuses,
fails at once with `JudgeCredentialsError` (not retryable, naming the model and the variable to
set): never retried by the model's retries (``max_retries``) nor by `StreamErrorRetryProcessor`,
although litellm reports the OpenAI SDK's "Missing credentials" as a retryable 500."""

from __future__ import annotations

from typing import Any

import pytest
from judge_support import Reply, failed_judge_call, score_it

from scorers import (
    JudgeCredentialsError,
    ScorerRunError,
    StreamErrorRetryProcessor,
)


def judged(settings: dict[str, Any] | None) -> Any:
    return score_it("judged", {**(settings or {}), "max_retries": 2},
                    error_processors=[StreamErrorRetryProcessor(max_retries=3, retry_unknown_errors=True)])


def credentials_error(caught: pytest.ExceptionInfo[ScorerRunError]) -> JudgeCredentialsError:
    return failed_judge_call(caught, JudgeCredentialsError)


async def test_a_judge_without_a_key_fails_at_once_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ScorerRunError) as caught:
        await judged(None).run(output="a")
    error = credentials_error(caught)
    assert error.retryable is False and error.missing_env == ("OPENAI_API_KEY",)
    assert "'openai/gpt-4o-mini' has no credentials: the environment does not set OPENAI_API_KEY" in str(error)
    assert "Missing credentials" in str(error)  # litellm's own words follow
    assert error.execution is not None and error.execution.request_count == 1  # sent once, retried never
    assert error.execution.model_call_count == 0  # and no reply came back


@pytest.mark.parametrize("status", [401, 403])
async def test_refused_credentials_are_sent_once(server: Any, settings: dict[str, Any], transport: str,
                                                 status: int) -> None:
    server.script(Reply.error(status), Reply.json({"score": 0.5}))
    with pytest.raises(ScorerRunError) as caught:
        await judged(settings).run(output="a")
    error = credentials_error(caught)
    assert len(server.requests) == 1
    assert (error.retryable, error.status_code, error.missing_env) == (False, status, ())
    assert "'openai/gpt-4o-mini' refused its credentials (not retried)" in str(error)
