"""The progress bar the offline commands draw on stderr while they read files, pull pages from a
backend or score (``inspect``, ``inspect --from``, ``score``, ``score --from``).
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

__all__ = ["progress"]


def progress(console: Console) -> Progress:
    """A progress bar drawn on ``console``; rich shows nothing when it is not a terminal.

    Example:
        >>> import io
        >>> with progress(Console(file=io.StringIO())) as bar:
        ...     task = bar.add_task("files", total=1)
        ...     bar.advance(task)
    """
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
