"""What the demo prints: the planned runs, a line per score as it arrives, and the summary."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.console import Console
from rich.text import Text

from collector.commands.demo.samples import PlannedRun
from collector.commands.demo.sink import ReceivedScore
from collector.work.registry import ScorerRegistry


@dataclass
class Outcome:
    """What a demo run saw.

    Example:
        >>> Outcome(expected=2).missing
        2
    """

    expected: int
    received: list[ReceivedScore] = field(default_factory=list)
    not_scorable: int = 0
    forwarded_spans: int = 0
    runs: int = 0
    sessions: int = 0  # conversations the runs make (scored by the conversation scorers)
    timed_out: bool = False
    elapsed_s: float = 0.0
    interrupted: bool = False

    @property
    def missing(self) -> int:
        """Expected scores that neither arrived nor were found not scorable.

        Example:
            >>> Outcome(expected=3, not_scorable=1).missing
            2
        """
        return max(0, self.expected - len(self.received) - self.not_scorable)

    @property
    def failures(self) -> int:
        """Scores that arrived as failures (``error.type``).

        Example:
            >>> Outcome(expected=0).failures
            0
        """
        return sum(1 for s in self.received if s.failed)


def session_name(session_id: str) -> str:
    """How a conversation's score line names it (the run column).

    Example:
        >>> session_name("chat-7")
        'session:chat-7'
    """
    return f"session:{session_id}"


class Printer:
    """Prints the header, the runs, one line per score as it arrives, and the summary.

    Args:
        console: where to print.
        runs: the planned runs (score lines name their run by its sample).
        sessions: the planned conversations' session ids (their score lines name them).
        scorer_width: the width of the scorer column.

    Example:
        >>> import io
        >>> console = Console(file=io.StringIO(), width=120)
        >>> printer = Printer(console, [PlannedRun("s1", "ab" * 16, "cd" * 8, "bot", "chat", ("q",))])
        >>> printer.score(ReceivedScore("ab" * 16, "cd" * 8, "q", "Quality", 0.5, "pass", "fine"))
        >>> console.file.getvalue().split()
        ['s1', 'Quality', '0.50', 'pass', 'fine']
    """

    def __init__(self, console: Console, runs: list[PlannedRun], scorer_width: int = 20,
                 sessions: Sequence[str] = ()) -> None:
        self.console = console
        self._runs = {(r.trace_id, r.span_id): r for r in runs}
        self._run_width = max((*(len(r.sample) for r in runs), *(len(session_name(s)) for s in sessions)), default=16)
        self._scorer_width = scorer_width

    def line(self, text: str | Text, style: str | None = None) -> None:
        """Print one line as is (no markup).

        Example:
            >>> import io
            >>> console = Console(file=io.StringIO())
            >>> Printer(console, []).line("[x]")
            >>> console.file.getvalue()
            '[x]\\n'
        """
        self.console.print(text, style=style, markup=False, highlight=False, soft_wrap=True)

    def runs(self) -> None:
        """Print the planned runs: sample, service, run span, trace id, scorers to come.

        Example:
            >>> import io
            >>> console = Console(file=io.StringIO(), width=200)
            >>> Printer(console, [PlannedRun("s1", "ab" * 16, "cd" * 8, "bot", "chat", ("q",))]).runs()
            >>> console.file.getvalue().split()
            ['s1', 'service', 'bot,', 'span', "'chat',", 'trace', 'abababababababababababababababab,', '1', 'scorers']
        """
        for run in self._runs.values():
            self.line(f"  {run.sample:<{self._run_width}}  service {run.service}, span {run.span_name!r}, "
                      f"trace {run.trace_id}, {len(run.scorer_ids)} scorers")

    def columns(self) -> None:
        """Print the column titles of the score lines.

        Example:
            >>> import io
            >>> console = Console(file=io.StringIO())
            >>> Printer(console, []).columns()
            >>> console.file.getvalue().split()
            ['run', 'scorer', 'score', 'label', 'reason']
        """
        self.line(f"  {'run':<{self._run_width}}  {'scorer':<{self._scorer_width}}  {'score':>5}  "
                  f"{'label':<8}  reason", style="bold")

    def score(self, score: ReceivedScore) -> None:
        """Print one score line (a failure shows its error type and message).

        Example:
            >>> import io
            >>> console = Console(file=io.StringIO(), width=200)
            >>> Printer(console, []).score(ReceivedScore("ab" * 16, "cd" * 8, "q", "Q", None,
            ...     error_type="RuntimeError", error_message="boom", service="bot"))
            >>> console.file.getvalue().split()
            ['bot/cdcdcdcdcdcdcdcd', 'Q', 'error', 'RuntimeError:', 'boom']
        """
        run = self._runs.get((score.trace_id, score.span_id))
        if score.session_id is not None:  # a conversation's score, on its last turn
            name = session_name(score.session_id)
        else:
            name = run.sample if run is not None else f"{score.service or '?'}/{score.span_id}"
        text = Text(f"  {name:<{self._run_width}}  {score.scorer_name:<{self._scorer_width}}  ")
        if score.failed:
            text.append("error", style="bold red")
            text.append(f"  {score.error_type}: {score.error_message or ''}", style="red")
        else:
            value = "-" if score.score is None else f"{score.score:.2f}"
            good = score.score or 0.0
            text.append(f"{value:>5}", style="green" if good >= 0.8 else "yellow" if good >= 0.5 else "red")
            text.append(f"  {score.label or '':<8}  {score.reason or ''}")
        self.line(text)


def describe_scorers(registry: ScorerRegistry) -> str:
    """One line naming each scorer with its pass threshold, labels and filter.

    Example:
        >>> from collector.commands.demo.samples import demo_config
        >>> from pathlib import Path
        >>> registry = ScorerRegistry.load(demo_config(Path("/tmp/d"), "").scorers)
        >>> describe_scorers(registry).split(", ")[0]
        'Keyword Coverage (pass at 0.5)'
    """
    parts = []
    for entry in registry.entries:
        cfg, notes = entry.config, []
        if cfg.pass_threshold is not None:
            notes.append(f"pass at {cfg.pass_threshold:g}")
        if cfg.labels:
            notes.append("labels " + "/".join(cfg.labels))
        flt = cfg.filter
        notes.extend(f"only {key} {value}" for key, value in
                     (("service", flt.service), ("agent", flt.agent), ("span", flt.span_name)) if value)
        parts.append(entry.scorer.name + (f" ({', '.join(notes)})" if notes else ""))
    return ", ".join(parts)


def summarize(outcome: Outcome, printer: Printer) -> None:
    """Print the last lines: runs scored, scores, failures, forwarded spans, elapsed time.

    Example:
        >>> import io
        >>> console = Console(file=io.StringIO(), width=200)
        >>> summarize(Outcome(expected=1, runs=1, elapsed_s=1.5), Printer(console, []))
        >>> console.file.getvalue().splitlines()[0]
        'the daemon found nothing more to do: 0 of 1 expected scores arrived or were not scorable'
    """
    scored_runs = len({(s.trace_id, s.span_id) for s in outcome.received if s.session_id is None})
    scored_sessions = len({s.session_id for s in outcome.received if s.session_id is not None})
    line = f"{len(outcome.received)} scores for {scored_runs} of {outcome.runs} runs"
    if outcome.sessions:
        line += f" and {scored_sessions} of {outcome.sessions} conversations"
    line += f", {outcome.failures} failed, "
    if outcome.not_scorable:
        line += f"{outcome.not_scorable} not scorable, "
    line += (f"in {outcome.elapsed_s:.1f} s; {outcome.forwarded_spans} agent spans forwarded unchanged; "
             "daemon stopped")
    if outcome.missing:
        why = "timed out: " if outcome.timed_out else "the daemon found nothing more to do: "
        printer.line(f"{why}{outcome.expected - outcome.missing} of {outcome.expected} expected scores "
                     "arrived or were not scorable", style="red")
    printer.line(line, style="bold" if not outcome.missing and not outcome.failures else "red")


