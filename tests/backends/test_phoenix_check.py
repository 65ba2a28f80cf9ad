"""Issue 42 (1): `tracescore check` asks a real Phoenix about the README's Phoenix configuration:
the sink's server answers; a project named by an ``x-project-name`` export header that Phoenix
does not have yet is a note (Phoenix answers "Project with name ... not found", and creates the
project with its first span), then confirmed once a span made it."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
from backends_support import Phoenix, agent_trace_body, cli, poll
from test_phoenix_backend import phoenix_config

NO_KEY = {"PHOENIX_API_KEY": ""}  # the README's env:PHOENIX_API_KEY, for a server without authentication


def check(tmp_path: Path, text: str) -> tuple[int, str, str]:
    path = tmp_path / "check.toml"
    path.write_text(text)
    done = cli("check", str(path), cwd=tmp_path, env=NO_KEY)
    return done.returncode, done.stdout, done.stderr


def test_check_asks_phoenix_about_the_sink_and_a_project_it_creates_with_its_first_span(
    tmp_path: Path, phoenix: Phoenix,
) -> None:
    code, out, err = check(tmp_path, phoenix_config(phoenix))  # the README's, as written
    assert code == 0, err
    assert f"backend: Phoenix at {phoenix.url} answers [sinks.phoenix]" in out, out

    project = f"agents-{uuid.uuid4().hex[:8]}"
    config = phoenix_config(phoenix).replace('protocol = "http/protobuf"\n',
                                             f'protocol = "http/protobuf"\nheaders = {{ "x-project-name" = "{project}" }}\n',
                                             1)
    code, out, err = check(tmp_path, config)
    assert code == 0, err
    assert (f"note: export.headers.x-project-name: project '{project}' does not exist yet on {phoenix.url} "
            f"(Project with name {project} not found): Phoenix creates it when the first span arrives") in out, out

    body, _, _ = agent_trace_body("Paris.")
    reply = httpx.post(f"{phoenix.url}/v1/traces", content=body, timeout=30,
                       headers={"Content-Type": "application/x-protobuf", "x-project-name": project})
    assert reply.status_code == 200, reply.text
    poll(lambda: httpx.get(f"{phoenix.url}/v1/projects/{project}", timeout=10).status_code == 200, 60,
         "Phoenix to create the project")
    code, out, err = check(tmp_path, config)
    assert code == 0 and f"backend: Phoenix project '{project}' on {phoenix.url}" in out, out + err
