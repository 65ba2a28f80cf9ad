"""The README's first-scorer example runs as written and prints what the README says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_readme_names_the_two_setup_commands() -> None:
    shell = "\n".join(blocks("sh"))
    assert "make demo" in shell and "make test" in shell


def test_readme_python_example_runs_and_prints_the_documented_output() -> None:
    code = blocks("python")
    assert code, "README has no python block"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        exec(compile("\n".join(code), str(README), "exec"), {"__name__": "readme"})
    (expected,) = blocks("text")
    assert stdout.getvalue() == expected
