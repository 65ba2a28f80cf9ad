"""A process's children as Linux's /proc lists them: the decision processes a daemon spawned."""

from __future__ import annotations

from pathlib import Path


def decision_processes(pid: int, *, with_helper: bool = False) -> set[int]:
    """The pool processes process ``pid`` spawned (``with_helper``: and multiprocessing's
    resource tracker, started once per process and kept)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found |= {int(c) for c in (task / "children").read_text().split()}
        except OSError:  # the thread ended meanwhile
            continue
    return found if with_helper else {c for c in found if b"spawn_main" in _cmdline(c)}


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # exited meanwhile
        return b""


def running(pids: set[int]) -> set[int]:
    """The processes of ``pids`` that still run (a zombie has exited)."""
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive
