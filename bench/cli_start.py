"""How long ``tracescore`` takes to answer: wall time of light commands, each as a fresh process.

Each command runs ``--runs`` times (default 10) as a new ``python -m collector.cli ...``
process, and the median (and min) wall time from spawn to exit is printed, with Python's
own bare start (``python -c pass``) as the ideal bound and each command's ratio to it:

* ``--version`` and ``--help``;
* ``check`` of a configuration without scorers (a SQLite ``queue.url`` in a temp dir);
* ``status URL --once`` with a URL nothing listens on: the command tries it, prints the
  connection error and exits 1, so what is measured is its start-up and one refused connect;
* ``dead-letters list --config`` on an empty SQLite queue (made with the tree's own schema):
  it opens the queue, prints an empty table and exits 0;
* for contrast, ``check`` of a configuration with one scorer (a file made with
  ``scorers.create_scorer``), which must import the scorers' package.

The bar of the issue (performance, item 5) is 0.3 s for the first five. Next to the wall
time, the median CPU time (user + system) of the same processes is printed: on a shared
machine the wall time grows with the load, the CPU time much less. The ``<= 0.3 s`` column
compares the median wall time with the bar.

``--compare REV`` checks REV out with ``git worktree add`` into a temporary directory,
runs the same commands there in the same rounds (each round runs every command on both
trees, so load on the machine hits both alike) and prints the ratio; the worktree is
removed afterwards. A command that tree does not have is reported as such. Both trees run
with the same interpreter (``--python``, default this one), with the tree as working
directory and ``PYTHONPATH``, so each imports its own ``collector``.

    .venv/bin/python bench/cli_start.py --compare 38ea31d
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BAR_S = 0.3


@dataclass
class Tree:
    """A source tree to run the CLI from, and what was prepared for it."""

    label: str
    path: Path
    folder: Path  # its temp files: configurations, the empty queue
    commands: set[str] = field(default_factory=set)  # the subcommands it has
    revision: str = ""


@dataclass(frozen=True)
class Case:
    """One measured command line: its label, whether the 0.3 s bar applies, and its argv."""

    label: str
    barred: bool
    argv: Callable[[Tree], list[str]]
    command: str | None = None  # the subcommand it needs (None: the top parser)


@dataclass
class Figures:
    """The wall times of one command on one tree, and what its first run did."""

    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    did: str = ""
    exit_code: int | None = None

    def add(self, timing: tuple[float, float]) -> None:
        """Record one run's wall and CPU seconds."""
        self.times.append(timing[0])
        self.cpu.append(timing[1])

    def cell(self) -> str:
        """Median (min) wall seconds, as printed."""
        return f"{statistics.median(self.times):.3f} ({min(self.times):.3f})"

    def cpu_cell(self) -> str:
        """Median CPU seconds, as printed."""
        return f"{statistics.median(self.cpu):.3f}"


def env_for(tree: Tree) -> dict[str, str]:
    """The environment a tree's commands run in: its own ``collector`` first on the path."""
    return {**os.environ, "PYTHONPATH": str(tree.path), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def run_once(python: str, tree: Tree, argv: list[str]) -> tuple[tuple[float, float], subprocess.CompletedProcess[str]]:
    """Run ``python argv`` in ``tree``; its wall time from spawn to exit and its CPU time
    (user + system, from the children's resource usage before and after), and the result."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([python, *argv], cwd=tree.path, env=env_for(tree), capture_output=True, text=True,
                          timeout=120, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime), done


def what_it_did(done: subprocess.CompletedProcess[str]) -> str:
    """Exit code and the first line the command printed (stdout, else stderr)."""
    lines = [line.strip() for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    first = lines[0] if lines else "(nothing printed)"
    return f"exit {done.returncode}: {first[:110]}"


def free_port() -> int:
    """A loopback port nothing listens on (bound, then closed): ``status`` is refused there."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def prepare(python: str, tree: Tree) -> None:
    """Write the configurations, find the tree's subcommands, make its empty SQLite queue."""
    tree.folder.mkdir(parents=True)
    tree.revision = head_of(tree.path)
    queue = tree.folder / "queue.db"
    (tree.folder / "plain.toml").write_text(f'[queue]\nurl = "sqlite:///{queue}"\n')
    (tree.folder / "answered.py").write_text(
        "from scorers import create_scorer\n"
        "answered = create_scorer(id='answered', description='1 when the agent answered')"
        ".generate_score(lambda run: 1.0)\n")
    (tree.folder / "scorers.toml").write_text(
        f'[queue]\nurl = "sqlite:///{queue}"\n[[scorers]]\nref = "{tree.folder / "answered.py"}:answered"\n')
    _, where = run_once(python, tree, ["-c", "import collector; print(collector.__file__)"])
    if not where.stdout.strip().startswith(str(tree.path)):
        sys.exit(f"{tree.label}: collector is imported from {where.stdout.strip() or where.stderr}, not {tree.path}")
    for name in ("status", "dead-letters", "check"):
        _, probe = run_once(python, tree, ["-m", "collector.cli", name, "--help"])
        if probe.returncode == 0:
            tree.commands.add(name)
    if "dead-letters" in tree.commands:  # the tree's own schema: its dead-letters reads that
        _, made = run_once(python, tree, ["-c", "import sqlite3, sys; from collector.store.sqlite.schema import SCHEMA;"
                                          " sqlite3.connect(sys.argv[1]).executescript(SCHEMA)", str(queue)])
        if made.returncode != 0:
            sys.exit(f"{tree.label}: cannot make an empty queue: {made.stderr[-500:]}")


def cases(closed_port: int) -> list[Case]:
    """The measured command lines, in the order printed; ``status`` aims at ``closed_port``."""
    cli = ["-m", "collector.cli"]
    return [
        Case("--version", True, lambda t: [*cli, "--version"]),
        Case("--help", True, lambda t: [*cli, "--help"]),
        Case("check (no scorers)", True, lambda t: [*cli, "check", str(t.folder / "plain.toml")], "check"),
        Case("status --once", True, lambda t: [*cli, "status", f"127.0.0.1:{closed_port}", "--once"], "status"),
        Case("dead-letters list", True,
             lambda t: [*cli, "dead-letters", "list", "--config", str(t.folder / "plain.toml")], "dead-letters"),
        Case("check (a scorer)", False, lambda t: [*cli, "check", str(t.folder / "scorers.toml")], "check"),
    ]


def add_worktree(rev: str, where: Path) -> Path:
    """Check ``rev`` out (detached) in a new worktree under ``where``; its path."""
    path = where / f"tree-{rev.replace('/', '_')}"
    added = subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(path), rev],
                           capture_output=True, text=True, check=False)
    if added.returncode != 0:
        sys.exit(f"cannot check {rev} out: {added.stderr.strip()}")
    return path


def remove_worktree(path: Path) -> None:
    """Remove a worktree made by `add_worktree` (its checkout and git's record of it)."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], check=False)


def head_of(path: Path) -> str:
    """The short commit a tree is at, and whether it has uncommitted changes."""
    done = subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=False)
    dirty = subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, check=False).stdout.strip()
    return done.stdout.strip() + (" + uncommitted changes" if dirty else "")


def measure(python: str, trees: list[Tree], runs: int) -> tuple[Figures, dict[tuple[str, str], Figures]]:
    """Every case on every tree, ``runs`` rounds (each round runs all of them); the bare start's figures too."""
    bare = Figures()
    figures: dict[tuple[str, str], Figures] = {}
    todo = cases(free_port())
    for case in todo:  # the first run of each: what it does, and a warm-up (bytecode compiled)
        for tree in trees:
            if case.command is None or case.command in tree.commands:
                _, done = run_once(python, tree, case.argv(tree))
                figures[case.label, tree.label] = Figures(did=what_it_did(done), exit_code=done.returncode)
    run_once(python, trees[0], ["-c", "pass"])
    for _ in range(runs):
        bare.add(run_once(python, trees[0], ["-c", "pass"])[0])
        for case in todo:
            for tree in trees:
                if (case.label, tree.label) in figures:
                    figures[case.label, tree.label].add(run_once(python, tree, case.argv(tree))[0])
    return bare, figures


def table(rows: list[list[str]]) -> str:
    """Rows as text columns: the first left-aligned, the others right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(cells))
    return "\n".join(lines)


def report(python: str, runs: int, trees: list[Tree], bare: Figures, figures: dict[tuple[str, str], Figures],
           load: float) -> None:
    ideal = statistics.median(bare.times)
    print(f"tracescore CLI start: wall time of each command as a fresh process, median (min) of {runs} runs, seconds")
    print(f"python: {python} ({sys.version.split()[0]}); {os.cpu_count()} CPUs, "
          f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after")
    for tree in trees:
        print(f"  {tree.label}: {tree.path} ({tree.revision})")
    print(f"ideal bound, bare `python -c pass`: {bare.cell()}, CPU {bare.cpu_cell()}")
    print()
    rows = [["command", trees[0].label, "CPU", f"<= {BAR_S} s", "/ bare"]]
    for other in trees[1:]:
        rows[0] += [other.label, "CPU", f"{trees[0].label} / {other.label}"]
    for case in cases(0):
        mine = figures[case.label, trees[0].label]
        median = statistics.median(mine.times)
        row = [case.label, mine.cell(), mine.cpu_cell(), ("yes" if median <= BAR_S else "NO") if case.barred else "-",
               f"{median / ideal:.1f}"]
        for other in trees[1:]:
            theirs = figures.get((case.label, other.label))
            if theirs is None:
                row += ["(no such command)", "-", "-"]
            elif theirs.exit_code != mine.exit_code:
                row += [theirs.cell(), theirs.cpu_cell(), "(exit codes differ)"]
            else:
                row += [theirs.cell(), theirs.cpu_cell(), f"{median / statistics.median(theirs.times):.2f}"]
        rows.append(row)
    print(table(rows))
    print()
    print("what each command did (its first run):")
    for case in cases(0):
        for tree in trees:
            got = figures.get((case.label, tree.label))
            print(f"  {case.label:<20} {tree.label:<10} {got.did if got else 'not run: the tree has no such command'}")


def main() -> None:
    """Parse the options, prepare the trees, measure, remove the worktree, print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=10, metavar="N", help="runs of each command (default 10)")
    parser.add_argument("--compare", metavar="REV", default=None,
                        help="also run the commands in a temporary worktree of this git revision")
    parser.add_argument("--python", default=sys.executable, help="the interpreter (default: this one)")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="tracescore-cli-start-") as tmp:
        folder = Path(tmp)
        trees = [Tree("this tree", ROOT, folder / "this")]
        compared: Path | None = None
        try:
            if args.compare:
                compared = add_worktree(args.compare, folder)
                trees.append(Tree(args.compare, compared, folder / "other"))
            for tree in trees:
                prepare(args.python, tree)
            bare, figures = measure(args.python, trees, args.runs)
        finally:
            if compared is not None:
                remove_worktree(compared)
        report(args.python, args.runs, trees, bare, figures, load)


if __name__ == "__main__":
    main()
