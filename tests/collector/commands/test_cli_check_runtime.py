"""`check` and `serve` refuse what passes every shape check and fails at run time (issue 42
point 9): a judge model without a provider prefix that litellm cannot place (each job would
be dead-lettered), a sink URL that goes on into the backend's API (Phoenix answers 405 there),
and the default gRPC protocol pointed at an HTTP port (found by asking the endpoint: real HTTP/1
and gRPC servers on loopback). Each message names the fix. `serve` refuses at start with the
same findings (`collector.commands.preflight`); a judge's is not started here, as it would
import litellm in one more process (seconds)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from aiohttp import web
from ports import hold_port  # tests/support
from repo_paths import FIXTURES
from test_cli_check import check  # `tracescore check CONFIG` of a config text
from web_app import start_app

from collector.cli import main

JUDGES = '''from scorers import Judge, create_scorer


def _judged(model):
    judge = Judge(model=model, instructions="Be strict.", model_settings={"api_base": API_BASE, "api_key": "k"})
    return create_scorer(id=model.replace("/", "-"), description="judged", judge=judge).generate_score(
        description="score", create_prompt=lambda run: "Score it.")


unplaced = _judged("llama3.1")
guessed = _judged("gpt-4o-mini")
prefixed = _judged("openai/llama3.1")
'''


def serve(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    """``tracescore serve`` on ``text``: expected to refuse at start, so bounded by a timeout."""
    config = tmp_path / "serve.toml"
    config.write_text(text + f'[queue]\nurl = "sqlite:///{tmp_path / "q.db"}"\n'
                             '[receiver]\ngrpc_endpoint = "127.0.0.1:0"\nhttp_endpoint = "127.0.0.1:0"\n')
    return subprocess.run([sys.executable, "-m", "collector.cli", "serve", "--config", str(config)],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})


def judges_file(tmp_path: Path, api_base: str) -> Path:
    path = tmp_path / "judges.py"
    path.write_text(f"API_BASE = {api_base!r}\n" + JUDGES)
    return path


async def test_a_judge_model_litellm_cannot_place_is_refused_with_the_prefix_to_write(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], server: object) -> None:
    judges = judges_file(tmp_path, server.url)  # type: ignore[attr-defined]
    # What the daemon would do with it: every score fails (the job is dead-lettered), no request sent.
    code = await asyncio.to_thread(main, ["score", str(FIXTURES / "openai-v2" / "S1.pb"), "--scorer",
                                          f"{judges}:unplaced", "--format", "jsonl"])
    out = capsys.readouterr().out
    assert code == 1 and "Judge model 'llama3.1' cannot be used" in out
    assert server.requests == []  # type: ignore[attr-defined]

    code, out, err = check(tmp_path, f'[[scorers]]\nref = "{judges}:unplaced"\n', capsys)
    assert code == 2 and out == ""
    assert err == ("tracescore: invalid configuration: scorer llama3.1: judge model 'llama3.1' has no provider "
                   "prefix and litellm cannot tell its provider: every judge call would fail and every job be "
                   "dead-lettered; write 'openai/llama3.1' (an OpenAI-compatible server at model_settings api_base), "
                   "'ollama/llama3.1' or 'hosted_vllm/llama3.1', or another litellm provider's prefix\n")

    # The fix the message gives works: the prefixed model's judge answers.
    code = await asyncio.to_thread(main, ["score", str(FIXTURES / "openai-v2" / "S1.pb"), "--scorer",
                                          f"{judges}:prefixed", "--format", "jsonl"])
    assert code == 0 and len(server.requests) == 1  # type: ignore[attr-defined]
    capsys.readouterr()


def test_a_judge_model_litellm_places_by_name_is_a_warning_with_its_prefix(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    judges = judges_file(tmp_path, "http://127.0.0.1:9/v1")
    code, out, err = check(tmp_path, f'[[scorers]]\nref = "{judges}:guessed"\n[[scorers]]\n'
                                     f'ref = "{judges}:prefixed"\n', capsys)
    assert code == 0, err
    assert [line.strip() for line in out.splitlines() if "warning" in line] == [
        "warning: scorer gpt-4o-mini: judge model 'gpt-4o-mini' has no provider prefix (litellm takes it for "
        "openai); write 'openai/gpt-4o-mini'"]


@pytest.mark.parametrize(("sink", "url", "base"), [
    ("phoenix", "http://127.0.0.1:6006/v1/traces", "http://127.0.0.1:6006"),
    ("phoenix", "http://127.0.0.1:6006/v1", "http://127.0.0.1:6006"),
    ("phoenix", "https://example.com/phoenix/v1/span_annotations", "https://example.com/phoenix"),
    ("mlflow", "http://127.0.0.1:5000/api/2.0/mlflow", "http://127.0.0.1:5000"),
    ("langfuse", "https://cloud.langfuse.com/api/public/scores", "https://cloud.langfuse.com"),
])
def test_a_sink_url_into_the_backends_api_is_refused_with_its_base_url(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], sink: str, url: str, base: str) -> None:
    key = {"phoenix": "endpoint", "mlflow": "tracking_uri", "langfuse": "host"}[sink]
    text = f'[sinks.{sink}]\n{key} = "{url}"\n' + ('public_key = "pk"\nsecret_key = "sk"\n' if sink == "langfuse" else "")
    code, _, err = check(tmp_path, text, capsys)
    assert code == 2
    assert err.startswith(f"tracescore: invalid configuration: sinks.{sink}.{key}: must be the ")
    assert err.rstrip().endswith(f"write '{base}'")
    code, _, err = check(tmp_path, text.replace(url, base), capsys)  # the fix it gives passes
    assert code == 0, err


def test_a_sink_under_a_path_prefix_is_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = check(tmp_path, '[sinks.phoenix]\nendpoint = "https://example.com/phoenix"\n', capsys)
    assert code == 0 and "sink phoenix: https://example.com/phoenix" in out, err


@pytest.fixture
async def http1_port() -> AsyncIterator[int]:
    """A plain HTTP/1.1 server (aiohttp) on loopback, as a backend's OTLP/HTTP port is."""
    async def accept(request: web.Request) -> web.Response:
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/v1/traces", accept)
    runner, port = await start_app(app)
    try:
        yield port
    finally:
        await runner.cleanup()


@pytest.fixture
async def grpc_port() -> AsyncIterator[int]:
    """A gRPC server (grpc.aio) on loopback."""
    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield port
    finally:
        await server.stop(0)


async def test_grpc_pointed_at_an_http_port_is_refused_at_check_and_at_start(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, http1_port: int,
        grpc_port: int) -> None:
    endpoint = f"http://127.0.0.1:{http1_port}"
    code, out, err = await asyncio.to_thread(check, tmp_path, f'[export]\nendpoint = "{endpoint}"\n', capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"tracescore: invalid configuration: export.endpoint: {endpoint} answers HTTP/1 "
                          "('HTTP/1.")
    assert ('set [export] protocol = "http/protobuf" (or OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf); else point '
            "the endpoint at its OTLP/gRPC port") in err
    started = await asyncio.to_thread(serve, tmp_path, f'[export]\nendpoint = "{endpoint}"\n')
    assert started.returncode == 2 and f"export.endpoint: {endpoint} answers HTTP/1" in started.stderr

    # The fixes pass: OTLP/HTTP to the HTTP port, gRPC to a gRPC port; a port nobody listens on
    # proves nothing (the backend may come up later) and passes too.
    nobody = hold_port()
    for text in (f'[export]\nendpoint = "{endpoint}"\nprotocol = "http/protobuf"\n',
                 f'[export]\nendpoint = "http://127.0.0.1:{grpc_port}"\n',
                 f'[export]\nendpoint = "127.0.0.1:{grpc_port}"\n',
                 f'[export]\nendpoint = "127.0.0.1:{nobody.getsockname()[1]}"\n'):
        code, out, err = await asyncio.to_thread(check, tmp_path, text, capsys)
        assert code == 0, (text, err)
    nobody.close()
    # The standard variable for the protocol is the fix too.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    code, _, err = await asyncio.to_thread(check, tmp_path, f'[export]\nendpoint = "{endpoint}"\n', capsys)
    assert code == 0, err
