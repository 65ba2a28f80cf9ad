"""``tracescore demo``: the daemon end to end on bundled sample traces, with no API key.

What it hands on: nothing; it starts a `collector.service.Service` on a temporary SQLite
queue, replays the sample traces (`traces/`, via `replay`) to its OTLP/gRPC receiver,
and prints every score that reaches its own OTLP sink (`sink`). `scorers` holds the
built-in code scorers it configures; `samples` plans the runs and scorers to expect;
`printer` prints them.
"""

from collector.commands.demo.command import run, run_demo

__all__ = ["run", "run_demo"]
