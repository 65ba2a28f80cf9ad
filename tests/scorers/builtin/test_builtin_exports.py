"""The package surface of `scorers.builtin`: exports, laziness, docstrings."""

from __future__ import annotations

import inspect
import subprocess
import sys

import scorers.builtin as builtin


def test_importing_scorers_does_not_import_builtin_and_builtin_does_not_import_litellm() -> None:
    code = (
        "import sys, scorers; assert 'scorers.builtin' not in sys.modules; "
        "import scorers.builtin; assert 'litellm' not in sys.modules; print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_every_export_exists_and_public_factories_have_examples() -> None:
    for name in builtin.__all__:
        obj = getattr(builtin, name)
        if inspect.isfunction(obj):
            assert obj.__doc__ and ">>>" in obj.__doc__, name
    for name in builtin.checks.__all__:
        obj = getattr(builtin.checks, name)
        assert obj.__doc__, name
        if inspect.isfunction(obj):
            assert ">>>" in obj.__doc__, name
