"""Every subcommand of ``tracescore``: its name, its help line, its arguments and its implementation.

``tracescore --help`` lists them in this order. Building the command line imports only the
argument modules (`collector.commands.arguments`); a command's implementation is imported
when that command runs, so each command imports only what it uses.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass

from collector.commands.arguments import (
    align,
    check,
    dead_letters,
    demo,
    inspect,
    judges,
    labels,
    score,
    serve,
    status,
)


@dataclass(frozen=True)
class Command:
    """One subcommand.

    ``implementation`` names the module whose ``run(args) -> int`` carries the command out.
    """

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    implementation: str

    def run(self, args: argparse.Namespace) -> int:
        """Import the implementation and run the command; returns the process exit code.

        Example:
            >>> command = Command("check", "validate", check.add_arguments, "collector.commands.check")
            >>> command.run(argparse.Namespace(config="/nonexistent/ts.toml"))
            2
        """
        return int(importlib.import_module(self.implementation).run(args))


COMMANDS: tuple[Command, ...] = (
    Command("demo", "run the daemon on bundled sample traces and print the scores it exports (no API key, no Redis)",
            demo.add_arguments, "collector.commands.demo"),
    Command("serve", "run the daemon: receive OTLP, score agent runs, export scores",
            serve.add_arguments, "collector.commands.serve"),
    Command("status", "show a running daemon's (or a scale-out group's) status, live",
            status.add_arguments, "collector.commands.status"),
    Command("dead-letters", "list, show, replay or purge the jobs that failed for good (dead letters)",
            dead_letters.add_arguments, "collector.commands.dead_letters"),
    Command("judges", "show judge budgets, circuit breakers and parked jobs; resume a judge model",
            judges.add_arguments, "collector.commands.judges"),
    Command("labels", "pull people's labels from the backends, list them, or import a JSONL file of them",
            labels.add_arguments, "collector.commands.labels"),
    Command("agreement", "how far each judge agrees with people's labels: kappa, accuracy, confusion, corrected mean",
            labels.add_agreement_arguments, "collector.commands.agreement"),
    Command("gate", "fail (exit 1) when a judge agrees with people's labels less than --min-kappa",
            labels.add_gate_arguments, "collector.commands.gate_kappa"),
    Command("align", "rewrite a scorer's judge instructions from people's labels; keep a rewrite only when it "
                     "agrees better on held-out items",
            align.add_arguments, "collector.commands.align"),
    Command("check", "validate a configuration file and import its scorers",
            check.add_arguments, "collector.commands.check"),
    Command("inspect", "print the agent runs found in saved OTLP files (no scoring)",
            inspect.add_arguments, "collector.commands.inspect"),
    Command("score", "score the agent runs in saved OTLP files with the given scorers (offline)",
            score.add_arguments, "collector.commands.score"),
)
"""The subcommands, in the order ``tracescore --help`` lists them."""
