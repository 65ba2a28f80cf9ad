"""`tracescore check` asks the backends the configuration names (issue 42): refused credentials
fail the check with the key to fix, an MLflow export endpoint without its experiment header
fails it, an unreachable server or one that never answers is a warning (exit 0), and no secret
is printed. The backends here are stand-ins on loopback answering as MLflow 3.17 and Phoenix
20.26 do; the real servers are asked in tests/backends (test_mlflow_held, test_phoenix_check)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from ports import hold_port  # tests/support
from web_app import start_app

from collector.cli import main
from collector.commands.check_backends import backend_findings
from collector.config import config_from_dict

TOKEN = "s3cret-token"  # the only credentials the stand-ins accept


def authorized(request: web.Request) -> bool:
    return request.headers.get("Authorization") == f"Bearer {TOKEN}"


async def mlflow_experiment(request: web.Request) -> web.Response:
    if not authorized(request):
        return web.json_response({"error_code": "UNAUTHENTICATED", "message": "Invalid token"}, status=401)
    experiment = request.query.get("experiment_id")
    if experiment == "0":
        return web.json_response({"experiment": {"experiment_id": "0", "name": "Default",
                                                 "lifecycle_stage": "active"}})
    return web.json_response({"error_code": "RESOURCE_DOES_NOT_EXIST",
                              "message": f"No Experiment with id={experiment} exists"}, status=404)


async def phoenix_projects(request: web.Request) -> web.Response:
    if not authorized(request):
        return web.Response(status=401, text="Invalid API key")
    return web.json_response({"data": [{"name": "default"}], "next_cursor": None})


@pytest.fixture
async def backend() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/api/2.0/mlflow/experiments/get", mlflow_experiment)
    app.router.add_get("/v1/projects", phoenix_projects)
    runner, port = await start_app(app)
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def check(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``tracescore check`` on ``text``, on a thread: the stand-ins answer on this loop meanwhile."""
    config = tmp_path / "tracescore.toml"
    config.write_text(text)
    code = await asyncio.to_thread(main, ["check", str(config)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


async def test_refused_credentials_fail_the_check_naming_the_key(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = await check(tmp_path, f'[sinks.mlflow]\ntracking_uri = "{backend}"\ntoken = "wrong-token"\n'
                                           f'[sinks.phoenix]\nendpoint = "{backend}"\napi_key = "wrong-key"\n', capsys)
    assert code == 2, out
    assert (f"tracescore: invalid configuration: sinks.mlflow.token: MLflow at {backend} refused the credentials "
            "(HTTP 401 Unauthorized: Invalid token)") in err, err
    assert (f"tracescore: invalid configuration: sinks.phoenix.api_key: Phoenix at {backend} refused the credentials "
            "(HTTP 401 Unauthorized: Invalid API key)") in err, err
    assert "wrong-token" not in out + err and "wrong-key" not in out + err

    code, out, err = await check(tmp_path, f'[sinks.mlflow]\ntracking_uri = "{backend}"\ntoken = "{TOKEN}"\n'
                                           f'[sinks.phoenix]\nendpoint = "{backend}"\napi_key = "{TOKEN}"\n', capsys)
    assert code == 0, err
    assert f"backend: MLflow at {backend} answers [sinks.mlflow]" in out
    assert f"backend: Phoenix at {backend} answers [sinks.phoenix]" in out and TOKEN not in out + err


async def test_a_missing_experiment_and_a_missing_header_fail_the_check_with_the_fix(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    export = f'[export]\nendpoint = "{backend}"\nprotocol = "http/protobuf"\n'
    auth = f'"Authorization" = "Bearer {TOKEN}"'
    code, _, err = await check(tmp_path, export + f'headers = {{ "x-mlflow-experiment-id" = "1", {auth} }}\n', capsys)
    assert code == 2
    assert (f"export.headers.x-mlflow-experiment-id: experiment 1 does not exist on {backend} (No Experiment with id=1 "
            "exists); create it") in err and "or use 0 (MLflow's Default experiment)" in err, err
    code, out, err = await check(tmp_path, export + f'headers = {{ "x-mlflow-experiment-id" = "0", {auth} }}\n', capsys)
    assert code == 0 and f"backend: MLflow experiment 0 (Default) on {backend}" in out, err
    code, _, err = await check(tmp_path, export + f"headers = {{ {auth} }}\n", capsys)
    assert code == 2 and "needs the header x-mlflow-experiment-id" in err, err
    assert TOKEN not in err


async def test_an_unreachable_backend_is_a_warning_not_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    holder = hold_port()  # nothing listens: connections are refused
    url = f"http://127.0.0.1:{holder.getsockname()[1]}"
    try:
        code, out, err = await check(tmp_path, f'[export]\nendpoint = "{url}"\nprotocol = "http/protobuf"\n'
                                               'headers = { "x-mlflow-experiment-id" = "1" }\n'
                                               f'[sinks.phoenix]\nendpoint = "{url}"\n', capsys)
    finally:
        holder.close()
    assert code == 0, err
    assert (f"warning: could not verify MLflow experiment 1 on {url} (ConnectionRefusedError: [Errno 111] Connection "
            "refused): the daemon keeps what it receives and retries until the server answers") in out, out
    assert f"warning: could not verify the Phoenix server of [sinks.phoenix] on {url}" in out, out


def test_a_backend_that_never_answers_is_a_warning_after_the_timeout() -> None:
    """A server that takes the connection and never answers: the check waits its timeout, once
    for all questions, then warns."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel accepts connections; nobody ever reads or answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        config = config_from_dict({"export": {"endpoint": url, "protocol": "http/protobuf",
                                              "headers": {"x-mlflow-experiment-id": "1"}},
                                   "sinks": {"mlflow": {"tracking_uri": url}}}, env={})
        started = time.monotonic()
        findings = backend_findings(config, timeout_s=0.5)
        took = time.monotonic() - started
    assert took < 2.0
    assert all(f.level == "warning" for f in findings) and findings, findings
    assert any("timed out" in f.text or "no answer within 0.5 s" in f.text for f in findings), findings
