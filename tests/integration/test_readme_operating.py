"""README "Operating it": every command line parses, and they run as written against a real
daemon started by the README's own `serve` line, in a folder holding `tracescore.toml` and
`traces/`. The only substitutions: the group `status` is pointed at that daemon's port (the
example group hosts are not ours to reach here), and the live `status` is asked for one view."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import aiohttp
from daemon_harness import agent_trace_body, free_port, wait_until
from repo_paths import FIXTURES
from serve_process import ServeProcess, cli

from collector.cli import build_parser

README = Path(__file__).parents[2] / "README.md"


def operating_commands() -> list[list[str]]:
    section = README.read_text().split("## Operating it", 1)[1]
    (block,) = re.findall(r"```sh\n(.*?)```", section.split("\n## ", 1)[0], re.S)
    lines = [line.split(" # ", 1)[0].strip() for line in block.splitlines() if line.strip()]
    return [shlex.split(line) for line in lines]


def test_every_operating_command_parses() -> None:
    commands = operating_commands()
    assert [c[1] for c in commands] == ["serve", "status", "status", "dead-letters", "dead-letters",
                                        "dead-letters", "score"]
    for command in commands:
        assert command[0] == "tracescore"
        build_parser().parse_args(command[1:])


async def test_the_operating_commands_run_as_written(tmp_path: Path) -> None:
    commands = operating_commands()
    http_port = free_port()
    (tmp_path / "broken_scorers.py").write_text(
        "from scorers import create_scorer\n"
        "broken = create_scorer(id='broken', description='fails').generate_score(lambda run: 1 / 0)\n")
    (tmp_path / "tracescore.toml").write_text(
        f'[receiver]\ngrpc_endpoint = ""\nhttp_endpoint = "127.0.0.1:{http_port}"\n[assembly]\ndecision_wait = 0.2\n'
        f'[queue]\nurl = "sqlite:///{tmp_path / "queue.db"}"\n[[scorers]]\nref = "broken_scorers.py:broken"\n')
    (tmp_path / "traces").mkdir()
    for name in ("S1.pb", "S2.pb", "S3.pb"):
        (tmp_path / "traces" / name).write_bytes((FIXTURES / "openai-v2" / name).read_bytes())
    serve = commands[0]
    assert serve[1:4] == ["serve", "--config", "tracescore.toml"]
    daemon = ServeProcess(tmp_path / "tracescore.toml", tmp_path / "daemon.log", http_port, flags=tuple(serve[4:]))
    await daemon.start()
    try:
        body, _, _ = agent_trace_body()
        async with aiohttp.ClientSession() as session:
            async with session.post(f"http://127.0.0.1:{http_port}/v1/traces", data=body,
                                    headers={"Content-Type": "application/x-protobuf"}) as resp:
                assert resp.status == 200

        async def dead_lettered() -> bool:  # polled on /status; the README's commands run once it is there
            async with aiohttp.ClientSession() as session:
                async with session.get(f"http://127.0.0.1:{http_port}/status") as resp:
                    (own, *_) = (await resp.json())["replicas"]
            return bool(own["queue"]["dead"] == 1)

        await wait_until(dead_lettered, timeout=30, what="a dead letter")
        url = f"http://127.0.0.1:{http_port}"
        status_alone, status_group = commands[1], commands[2]
        code, out, err = await cli(*status_alone[1:], "--once", cwd=tmp_path)  # --config finds the daemon
        assert code == 0 and "broken" in out and f"from {url}" in out, err
        group = [url if a.startswith("http://10.") else a for a in status_group[1:]]
        code, out, err = await cli(*group, cwd=tmp_path)
        assert code == 0 and json.loads(out)["decisions"]["broken"]["failed"] == 1, err
        for command, expect in zip(commands[3:6], ("broken", "ZeroDivisionError", "replayed 1"), strict=True):
            code, out, err = await cli(*command[1:], cwd=tmp_path)
            assert code == 0 and expect in out, (command, err)
        code, out, err = await cli(*commands[6][1:], cwd=tmp_path)
        assert code == 0 and "completeness" in out + err, err
    finally:
        assert await daemon.stop() == 0
