"""Requests to a backend (`collector.receive.pull.client`): retried with backoff on 429/5xx and
no answer, ``Retry-After`` honoured, anything else one `PullError` line at once."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from ports import hold_port
from web_app import start_app

from collector.common.errors import PullError
from collector.receive.pull.client import JsonClient, Retry

FAST = Retry(attempts=4, min_backoff_s=0.01, max_backoff_s=0.02, timeout_s=5)


@dataclass
class Script:
    """A backend that answers each request with the next scripted (status, body, headers)."""

    answers: list[tuple[int, str, dict[str, str]]] = field(default_factory=list)
    seen: list[float] = field(default_factory=list)  # when each request arrived
    auth: list[str] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append(time.monotonic())
        self.auth.append(request.headers.get("Authorization", ""))
        status, body, headers = self.answers.pop(0) if self.answers else (200, '{"ok": true}', {})
        return web.Response(status=status, text=body, headers=headers, content_type="application/json")


@pytest.fixture
async def backend() -> AsyncIterator[tuple[Script, str]]:
    script = Script()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", script.handle)
    runner, port = await start_app(app)
    try:
        yield script, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_429_and_5xx_are_retried_until_an_answer(backend: tuple[Script, str]) -> None:
    script, url = backend
    script.answers = [(429, "slow down", {}), (503, "busy", {}), (502, "", {})]
    async with JsonClient({"Authorization": "Bearer k"}, FAST) as client:
        assert await client.get(f"{url}/x") == {"ok": True}
        assert client.requests == 4
    assert script.auth == ["Bearer k"] * 4


async def test_retry_after_is_honoured(backend: tuple[Script, str]) -> None:
    script, url = backend
    script.answers = [(429, "{}", {"Retry-After": "1"})]
    async with JsonClient(retry=FAST) as client:
        await client.post(f"{url}/x", {"q": 1})
    waited = script.seen[1] - script.seen[0]
    assert 0.9 <= waited < 5, waited  # the backend's delay, not the 10-20 ms backoff


async def test_the_last_failure_is_one_line_naming_the_url_and_the_attempts(backend: tuple[Script, str]) -> None:
    script, url = backend
    script.answers = [(503, '{"message": "overloaded"}', {})] * 4
    async with JsonClient(retry=FAST) as client:
        with pytest.raises(PullError) as caught:
            await client.get(f"{url}/v1/x")
    assert str(caught.value) == f"GET {url}/v1/x: HTTP 503: overloaded (after 4 attempts)"
    assert len(script.seen) == 4


@pytest.mark.parametrize(("status", "body", "message"), [
    (404, "Project with name p not found", "HTTP 404: Project with name p not found"),
    (401, '{"message": "Invalid credentials"}', "HTTP 401: Invalid credentials"),
    (400, '{"error_code": "INVALID_PARAMETER_VALUE", "message": "bad filter"}',
     "HTTP 400: INVALID_PARAMETER_VALUE: bad filter"),
    (200, "<html>proxy login</html>", "the answer is not JSON: '<html>proxy login</html>'"),
])
async def test_a_refusal_or_garbage_fails_at_once(backend: tuple[Script, str], status: int, body: str,
                                                  message: str) -> None:
    script, url = backend
    script.answers = [(status, body, {})]
    async with JsonClient(retry=FAST) as client:
        with pytest.raises(PullError) as caught:
            await client.get(f"{url}/v1/x")
    assert str(caught.value) == f"GET {url}/v1/x: {message}"
    assert len(script.seen) == 1  # never retried


async def test_no_answer_is_retried_then_reported() -> None:
    holder = hold_port()  # bound, not listening: connections are refused
    url = f"http://127.0.0.1:{holder.getsockname()[1]}/api"
    try:
        async with JsonClient(retry=FAST) as client:
            with pytest.raises(PullError, match=r"^GET .*/api: no answer: .* \(after 4 attempts\)$"):
                await client.get(url)
            assert client.requests == 4
    finally:
        holder.close()


def test_backoff_doubles_to_its_cap() -> None:
    retry = Retry(attempts=8, min_backoff_s=0.5, max_backoff_s=3.0)
    assert [retry.cap(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
