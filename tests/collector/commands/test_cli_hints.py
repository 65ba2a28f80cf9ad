"""Smaller frictions of issue 42 point 13, through the CLI: an unknown config key gets a "did you
mean"; a ``--from`` URL without its ``backend+`` gets the URL to write; a scorer ref naming
nothing lists the file's scorers; ``check`` takes ``--config`` as every other command does;
``-v`` lines of a conversation's score name the session; a breaker for a judge model no scorer
calls any more is closed when a worker starts; the deployment files point to the README."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path

import pytest
from conversation_traces import turn_body
from repo_paths import FIXTURES, REPO

from collector.cli import main
from collector.common.judge_types import Breaker
from collector.config import ScorerConfig, config_from_dict
from collector.service import Service
from collector.store.sqlite.store import SqliteStore
from collector.work.registry import RegisteredScorer, ScorerRegistry
from scorers import Judge, create_scorer

SCORERS = '''from scorers import create_scorer

relevance = create_scorer(id="relevance", description="d").generate_score(lambda run: 1.0)
tone = create_scorer(id="tone", description="d").generate_score(lambda run: 1.0)
turns = create_scorer(id="turns", description="d", type="conversation").generate_score(lambda run: float(len(run.turns)))
'''


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(("toml", "env", "says"), [
    ("[sessions]\nidle = 8\n", {}, "sessions.idle: unknown key; did you mean 'idle_s'?"),
    ("[sessions]\nmin_turn = 2\n", {}, "sessions.min_turn: unknown key; did you mean 'min_turns'?"),
    ('[sinks.pheonix]\nendpoint = "http://p:6006"\n', {}, "sinks.pheonix: unknown key; did you mean 'phoenix'?"),
    ('[[scorers]]\nref = "m:s"\nfilters = {}\n', {}, "scorers.0.filters: unknown key; did you mean 'filter'?"),
    ("", {"TRACESCORE_WORKERS_CONCURENCY": "3"}, "workers.concurency: unknown key; did you mean 'concurrency'?"),
    ("[export]\nzzz = 1\n", {}, "export.zzz: unknown key; [export] takes endpoint, protocol, headers,"),
])
def test_an_unknown_key_names_the_key_it_is_closest_to(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch, toml: str,
                                                       env: dict[str, str], says: str) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config = tmp_path / "ts.toml"
    config.write_text(toml)
    code, out, err = run_cli(capsys, "check", str(config))
    assert code == 2 and out == "" and err.startswith(f"tracescore: invalid configuration: {says}")


def test_check_takes_its_config_as_config_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, other = tmp_path / "ts.toml", tmp_path / "other.toml"
    config.write_text('[receiver]\nhttp_endpoint = "127.0.0.1:14318"\n')
    other.write_text("")
    for argv in ([str(config)], ["--config", str(config)], ["-c", str(config)], [str(config), "--config", str(config)]):
        code, out, err = run_cli(capsys, "check", *argv)
        assert code == 0 and out.startswith(f"{config}: OK\n"), (argv, err)
    code, out, err = run_cli(capsys, "check", str(config), "--config", str(other))
    assert code == 2 and out == ""
    assert err == (f"tracescore check: CONFIG {config} and --config {other} name different files: "
                   "give one of them\n")
    code, out, _ = run_cli(capsys, "check")  # neither: the defaults and TRACESCORE_* variables, as serve runs
    assert code == 0 and out.startswith("(no file: the defaults and TRACESCORE_* variables): OK\n")


@pytest.mark.parametrize("command", ["score", "inspect"])
def test_a_from_url_without_its_backend_gets_the_url_to_write(capsys: pytest.CaptureFixture[str],
                                                              command: str) -> None:
    scorer = ("--scorer", "scorers.builtin:completeness") if command == "score" else ()
    code, out, err = run_cli(capsys, command, "--from", "phoenix://127.0.0.1:9/support-bot", *scorer)
    assert code == 2 and out == ""
    assert err == ("tracescore: --from phoenix://127.0.0.1:9/support-bot: write phoenix+http://127.0.0.1:9/support-bot "
                   "(the backend, '+', then the server's http(s) URL: phoenix+http://HOST:6006/PROJECT, "
                   "mlflow+http://HOST:5000/EXPERIMENT_ID or langfuse+https://HOST)\n")


def test_a_scorer_ref_naming_nothing_lists_the_files_scorers(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    module = tmp_path / "my_scorers.py"
    module.write_text(SCORERS)
    file = str(FIXTURES / "openai-v2" / "S1.pb")
    code, _, err = run_cli(capsys, "score", file, "--scorer", f"{module}:relevanse")
    assert code == 2
    assert err == (f"tracescore: scorer ref '{module}:relevanse': module has no attribute 'relevanse'; did you mean "
                   "'relevance'? Its scorers: relevance, tone, turns\n")
    code, _, err = run_cli(capsys, "score", file, "--scorer", f"{module}:quality")
    assert err.endswith("module has no attribute 'quality'; its scorers: relevance, tone, turns\n") and code == 2
    config = tmp_path / "ts.toml"
    config.write_text(f'[[scorers]]\nref = "{module}:tonne"\n')
    code, _, err = run_cli(capsys, "check", str(config))
    assert code == 2 and "scorers[0].ref: scorer ref" in err and "did you mean 'tone'?" in err


def test_v_lines_of_a_conversations_score_name_the_session(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           caplog: pytest.LogCaptureFixture) -> None:
    module = tmp_path / "my_scorers.py"
    module.write_text(SCORERS)
    files = []
    for i in range(2):
        body, trace_id, span_id = turn_body("chat-7", i)
        files.append(tmp_path / f"turn{i}.pb")
        files[-1].write_bytes(body)
    with caplog.at_level(logging.INFO, logger="collector.commands.scoring"):
        code, _, _ = run_cli(capsys, "score", *map(str, files), "--scorer", f"{module}:turns", "--scorer",
                             f"{module}:tone", "--format", "jsonl", "-v")
    assert code == 0
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("scored ")]
    assert (f"scored turns on session 'chat-7' (revision 1; last turn: trace {trace_id} span {span_id}): 2.0 ("
            in "\n".join(lines))
    assert sum(line.startswith("scored tone on trace ") for line in lines) == 2  # runs as before


async def test_a_breaker_of_a_model_no_scorer_calls_is_closed_when_a_worker_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from scorers import _judge_transport

    async def no_import() -> None:  # the start loads litellm for a judge scorer: seconds this test needs not
        return None

    monkeypatch.setattr(_judge_transport, "ensure_litellm", no_import)
    queue = tmp_path / "q.db"
    store = SqliteStore(str(queue))
    await store.start()
    for model in ("gpt-4o-mni", "openai/gpt-4o-mini"):  # a typo since fixed, and the model in use
        await store.open_judge_breaker(Breaker(f"{model}#c0ffee", model, "404 unknown model", 1.0, 9e9, 60.0))
    await store.shutdown()
    config_file = tmp_path / "ts.toml"
    config_file.write_text(f'[queue]\nurl = "sqlite:///{queue}"\n')
    code, before, _ = await asyncio.to_thread(run_cli, capsys, "judges", "--config", str(config_file))
    assert code == 0 and "circuit breaker gpt-4o-mni open since" in before

    judged = create_scorer(id="q", description="d", judge=Judge(model="openai/gpt-4o-mini")).generate_score(
        description="s", create_prompt=lambda run: "Score it.")
    config = config_from_dict({"receiver": {"grpc_endpoint": "", "http_endpoint": "127.0.0.1:0"},
                               "queue": {"url": f"sqlite:///{queue}"}}, env={})
    service = Service(config, ScorerRegistry([RegisteredScorer(judged, ScorerConfig(ref="m:q"))]))
    with caplog.at_level(logging.INFO, logger="collector.work.governor"):
        await service.start()
        await service.shutdown()
    assert ("judge gpt-4o-mni: its circuit breaker (404 unknown model) is closed: no registered scorer calls "
            "this model") in caplog.text
    code, after, _ = await asyncio.to_thread(run_cli, capsys, "judges", "--config", str(config_file))
    assert code == 0 and "gpt-4o-mni" not in after
    assert "circuit breaker openai/gpt-4o-mini open since" in after  # a model in use keeps its breaker


def test_the_deployment_files_cite_the_readme_not_a_spec_the_repository_lacks() -> None:
    assert not (REPO / "SPEC.md").exists()
    readme = (REPO / "README.md").read_text()
    for path in sorted((REPO / "deploy").rglob("*")):
        if path.is_file() and path.suffix in (".toml", ".yml", ".yaml", ".md", ".service", ""):
            text = path.read_text(errors="replace")
            assert "SPEC" not in text, path
            for section in re.findall(r'README(?:\'s)?:? "([^"]+)"', text):
                assert section in readme, (path, section)
