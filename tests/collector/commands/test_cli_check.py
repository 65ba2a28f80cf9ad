"""`tracescore check` refuses what would fail at run time (malformed URLs, ports outside
1..65535), warns when nothing would be scored; factories and their args; scorer import
errors name their line (and show the traceback at -v); global flags after the subcommand."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from collector.cli import build_parser, main


def check(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    config = tmp_path / "tracescore.toml"
    config.write_text(text)
    code = main(["check", str(config)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(("text", "says"), [
    ('[export]\nendpoint = "htp//127.0.0.1:14317"\n',
     "export.endpoint: must be http(s)://HOST[:PORT][/path] or HOST:PORT, got 'htp//127.0.0.1:14317'"),
    ('[export]\nendpoint = "http://backend:99999"\n', "export.endpoint: port 99999 is outside 1..65535"),
    ('[export]\nendpoint = "backend:0"\n', "export.endpoint: port 0 is outside 1..65535"),
    ('[export]\nendpoint = "http//backend:4317"\n', "export.endpoint: must be"),
    ('[export]\nendpoint = "http://:4317"\n', "export.endpoint: must be"),
    ('[receiver]\ngrpc_endpoint = "0.0.0.0:99999"\n', "receiver.grpc_endpoint: port 99999 is outside 1..65535"),
    ('[receiver]\nhttp_endpoint = "127.0.0.1:-1"\n', "receiver.http_endpoint: must be HOST:PORT"),
    ('[queue]\nurl = "redis://127.0.0.1:99999/0"\n', "queue.url: not a valid Redis URL: Port out of range"),
    ('[queue]\nurl = "redis+sentinel://s1:26379,s2:99999/primary/0"\n', "queue.url: not a valid Redis URL: port '99999'"),
    ('[queue]\nurl = "redis+sentinel://s1:26379,s2:26379"\n', "queue.url: not a valid Redis URL: name the primary"),
    ('[queue]\nurl = "redis+sentinel://s1/primary/zero"\n', "queue.url: not a valid Redis URL: the database must be a number"),
    ('[queue]\nurl = "redis+cluster://n1:7000,,n2:7001"\n', "queue.url: not a valid Redis URL: an empty host"),
    ('[queue]\nurl = "redis+cluster://n1:7000/2"\n', "queue.url: not a valid Redis URL: a Cluster has only database 0"),
    ('[queue]\nurl = "redis+cluster://n1:7000?sentinel_password=x"\n', "applies to redis+sentinel:// URLs only"),
    ('[queue]\nurl = "redis+cluster://n1:7000?socket_timout=3"\n', "options Redis does not know: socket_timout"),
    ('[queue]\nurl = "redis+sentinal://s1/primary/0"\n', "queue.url: must start with sqlite:///, redis://"),
])
def test_check_rejects_what_would_fail_at_run_time(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   text: str, says: str) -> None:
    code, _, err = check(tmp_path, text, capsys)
    assert code == 2 and says in err


def test_check_shows_redis_urls_without_their_passwords(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = "rediss+sentinel://app:s3cret@s1:26379,s2:26379,s3:26379/mymaster/2?sentinel_password=t0p&socket_timeout=3"
    code, out, err = check(tmp_path, f'[queue]\nurl = "{url}"\nwait_replicas = 1\nwait_timeout_ms = 250\n', capsys)
    assert code == 0, err
    assert ("queue: rediss+sentinel://app:***@s1:26379,s2:26379,s3:26379/mymaster/2?sentinel_password=***"
            "&socket_timeout=3 (Sentinel primary 'mymaster' via 3 sentinels; success after 1 replica acknowledged, "
            "else 503 after 250 ms)") in out
    assert "s3cret" not in out + err and "t0p" not in out + err
    code, out, _ = check(tmp_path, '[queue]\nurl = "redis+cluster://:pw@n1:7000,n2:7001"\nkey_prefix = "team-a:"\n',
                         capsys)
    assert code == 0 and "queue: redis+cluster://:***@n1:7000,n2:7001 (Cluster, 2 startup nodes; keys in slot" in out
    assert "of the hash tag {team-a}" in out


def test_check_shows_where_each_partition_lands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = check(tmp_path, '[queue]\nurl = "redis+cluster://n1:7000"\nkey_prefix = "team-a:"\npartitions = 3\n',
                           capsys)
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.strip().startswith("queue:"))
    slots = [int(s) for s in line.split("slots ")[1].split(" (")[0].split(", ")]
    assert [slot * 3 // 16384 for slot in slots] == [0, 1, 2]  # one per primary of a 3-primary Cluster
    assert "work in 3 partitions" in line and "{team-a|p0|" in line and "{team-a|p2|" in line
    code, out, err = check(tmp_path, '[queue]\nurl = "redis://r:6379/0"\npartitions = 2\n', capsys)
    assert code == 0 and "(one server, 2 partitions;" in out
    for bad, problem in (("partitions = 3", "queue.partitions: needs a Redis queue.url"),
                         ('url = "redis://r/0"\npartitions = 0', "queue.partitions"),
                         ('url = "redis://r/0"\npartitions = 65', "queue.partitions")):
        code, out, err = check(tmp_path, f"[queue]\n{bad}\n", capsys)
        assert code == 2 and problem in err, (bad, err)


def test_check_warns_when_no_scorer_is_configured(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = check(tmp_path, '[export]\nendpoint = "http://127.0.0.1:14317"\n', capsys)
    assert code == 0 and "warning: no scorer configured" in out


def test_check_names_conversation_scorers_and_the_session_rules(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "convo.py").write_text('from scorers import create_scorer\n'
                                       'c = create_scorer(id="goal", description="d", type="conversation")'
                                       '.generate_score(lambda run: 1.0)\n')
    code, out, err = check(tmp_path, f'[sessions]\nidle_s = 60\nmax_revisions = 3\n'
                                     f'[[scorers]]\nref = "{tmp_path / "convo.py"}:c"\n', capsys)
    assert code == 0, err
    assert "scorer goal (conversations, version -" in out
    assert "sessions: scored 60 s after their last turn or at 'tracescore.session.end' = true; at most 3 revisions" in out
    assert "fewer than" not in out  # min_turns 1: every session is scored
    code, out, err = check(tmp_path, f'[sessions]\nmin_turns = 2\n[[scorers]]\nref = "{tmp_path / "convo.py"}:c"\n',
                           capsys)
    assert code == 0, err
    assert "fewer than 2 turns: counted, not scored" in out
    code, out, err = check(tmp_path, '[sessions]\nmin_turns = 3\nmax_turns = 2\n', capsys)
    assert code != 0 and "sessions.min_turns: must be at most sessions.max_turns (2), got 3" in out + err
    code, out, _ = check(tmp_path, '[sessions]\nmax_turns = 0\n', capsys)
    assert code == 2
    code, out, _ = check(tmp_path, '[[scorers]]\nref = "scorers.builtin:completeness"\n', capsys)
    assert code == 0 and "sessions:" not in out  # no conversation scorer: no sessions tracked


def test_a_factory_with_args_is_a_scorer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = check(tmp_path, '[[scorers]]\nref = "scorers.builtin:completeness"\n'
                                     '[[scorers]]\nref = "scorers.builtin:keyword_coverage"\n'
                                     'args = { id = "keywords-strict" }\n', capsys)
    assert code == 0, err
    assert "scorer completeness" in out and "scorer keywords-strict" in out and "warning" not in out
    code, _, err = check(tmp_path, '[[scorers]]\nref = "scorers.builtin:completeness"\nargs = { nope = 1 }\n', capsys)
    assert code == 2 and "scorers[0].ref" in err and "cannot be called with args {'nope': 1}" in err


def test_args_for_a_scorer_object_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "plain_scorers.py").write_text(
        "from scorers import create_scorer\n"
        "plain = create_scorer(id='plain', description='p').generate_score(lambda run: 1.0)\n")
    code, _, err = check(tmp_path, f'[[scorers]]\nref = "{tmp_path / "plain_scorers.py"}:plain"\nargs = {{ a = 1 }}\n',
                         capsys)
    assert code == 2 and "args are given but it names a scorer, not a factory" in err


def test_an_import_error_names_its_line_and_shows_the_traceback_at_v(tmp_path: Path) -> None:
    (tmp_path / "bad_scorers.py").write_text("import os\n\nRATIO = 1 / 0\n")
    config = tmp_path / "tracescore.toml"
    config.write_text(f'[[scorers]]\nref = "{tmp_path / "bad_scorers.py"}:quality"\n')
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    quiet = subprocess.run([sys.executable, "-m", "collector.cli", "check", str(config)],
                           capture_output=True, text=True, timeout=120, check=False, env=env)
    assert quiet.returncode == 2
    assert f"import failed: ZeroDivisionError: division by zero (at {tmp_path / 'bad_scorers.py'}:3)" in quiet.stderr
    assert "Traceback" not in quiet.stderr
    loud = subprocess.run([sys.executable, "-m", "collector.cli", "check", str(config), "-v", "--log-format", "json"],
                          capture_output=True, text=True, timeout=120, check=False, env=env)
    assert loud.returncode == 2
    (logged,) = [json.loads(line) for line in loud.stderr.splitlines() if line.startswith("{")]
    assert 'bad_scorers.py", line 3, in <module>' in logged["exc_info"] and logged["level"] == "INFO"


@pytest.mark.parametrize("argv", [
    ["-v", "serve", "--scorer", "m:s"], ["serve", "-v", "--scorer", "m:s"], ["serve", "--scorer", "m:s", "-v"],
])
def test_global_flags_go_before_or_after_the_subcommand(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    assert (args.verbose, args.log_format, args.scorer) == (1, "text", ["m:s"])
    assert build_parser().parse_args(["--log-format", "json", "dead-letters", "list", "-vv"]).verbose == 2
    assert build_parser().parse_args(["status", "--log-format", "json"]).log_format == "json"


JUDGED_SCORERS = '''from scorers import Judge, create_scorer


def _judged(scorer_id, **settings):
    judge = Judge(model="openai/gpt-4o-mini", instructions="Be strict.", model_settings=settings or None)
    return create_scorer(id=scorer_id, description="judged", judge=judge).generate_score(
        description="score", create_prompt=lambda run: "Score it.")


keyless = _judged("keyless")
local = _judged("local", api_base="http://127.0.0.1:8000/v1")
keyed = _judged("keyed", api_key="sk-in-settings")
'''


def test_check_warns_when_a_judge_has_no_key(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "judged_scorers.py").write_text(JUDGED_SCORERS)
    config = "".join(f'[[scorers]]\nref = "{tmp_path / "judged_scorers.py"}:{name}"\n'
                     for name in ("keyless", "local", "keyed"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code, out, err = check(tmp_path, config, capsys)
    assert code == 0, err
    warnings = [line.strip() for line in out.splitlines() if "warning" in line]
    assert warnings == ["warning: scorer keyless: judge model 'openai/gpt-4o-mini' needs OPENAI_API_KEY, which "
                        "the environment does not set: every judge call would fail"]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    code, out, _ = check(tmp_path, config, capsys)
    assert code == 0 and "warning" not in out and "sk-test" not in out


@pytest.mark.parametrize(("ref", "loads"), [("scorers.builtin:completeness", False), ("keyless", True)])
def test_check_loads_litellm_only_for_a_judge_scorer(tmp_path: Path, ref: str, loads: bool) -> None:
    (tmp_path / "judged_scorers.py").write_text(JUDGED_SCORERS)
    target = ref if ":" in ref else f"{tmp_path / 'judged_scorers.py'}:{ref}"
    config = tmp_path / "tracescore.toml"
    config.write_text(f'[[scorers]]\nref = "{target}"\n')
    code = ("import sys\nfrom collector.cli import main\n"
            f"code = main(['check', {str(config)!r}])\nprint(code, 'litellm' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"0 {loads}"
