"""``tracescore serve``'s start: once serving, it says so and keeps what start-up made out of the
garbage collector's walks (a full collection walked every module and schema each time)."""

from __future__ import annotations

import gc

import pytest

from collector.commands.serve import started


def test_once_serving_the_daemon_says_so_and_freezes_what_start_up_made(capsys: pytest.CaptureFixture[str]) -> None:
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    try:
        started("tracescore: serving http://127.0.0.1:4318")
        assert gc.get_freeze_count() > 1000  # this process's modules, at least
        assert capsys.readouterr().err == "tracescore: serving http://127.0.0.1:4318\n"
    finally:
        gc.unfreeze()  # the test process goes on collecting as before
