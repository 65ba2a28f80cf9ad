"""Where an interrupted ``score --from`` backfill picks up (``--resume``).

After each page is scored (and, with ``--export``, its scores sent), the cursor file is
rewritten with the token of the next page; a resumed run reads the same window (kept here
resolved, so ``--since 7d`` means the week the first run meant) from that page on. Writes are
atomic (a temporary file in the same folder, flushed to disk, then renamed over the old one):
a crash leaves the previous cursor or the new one, never half of one. A page interrupted
before its cursor was written is read and scored again; the scores' ids make that safe.

The file is ``--cursor FILE``, or by default ``.tracescore/backfill/<digest>.json`` under the
working directory (beside the default queue file), the digest naming the source, the
filter and the scorers: the same command finds its own cursor again.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from collector.common.errors import ConfigError
from collector.receive.pull.source import Window

STATE_DIR = Path(".tracescore") / "backfill"


@dataclass(frozen=True)
class Cursor:
    """How far one backfill got.

    Attributes:
        source: the ``--from`` URL (credentials masked), ``filter`` and ``scorers``: what it reads
            and scores (a resume of another command is refused).
        window: the window, resolved.
        token: the token of the next page to read (None with ``pages`` 0: the first page).
        pages, traces: pages and traces done.
        done: the last page was done.
    """

    source: str
    filter: str | None
    scorers: tuple[str, ...]
    window: Window = field(default_factory=Window)
    token: str | None = None
    pages: int = 0
    traces: int = 0
    done: bool = False

    def advanced(self, token: str | None, traces: int) -> Cursor:
        """The cursor after one more page (``token``: the page after it; None: it was the last).

        Example:
            >>> c = Cursor("phoenix+http://h/p", None, ("q",)).advanced("t2", 10).advanced(None, 5)
            >>> (c.token, c.pages, c.traces, c.done)
            (None, 2, 15, True)
        """
        return replace(self, token=token, pages=self.pages + 1, traces=self.traces + traces, done=token is None)

    def same_backfill(self, other: Cursor) -> bool:
        """Whether ``other`` was written by the same command (source, filter, scorers)."""
        return (self.source, self.filter, tuple(self.scorers)) == (other.source, other.filter, tuple(other.scorers))

    def to_json(self) -> str:
        """The file's text.

        Example:
            >>> c = Cursor("mlflow+http://h/1", "tag.x = '1'", ("q",), token="abc", pages=1)
            >>> Cursor.from_json(c.to_json()) == c
            True
        """
        data: dict[str, Any] = asdict(self)
        data["window"] = self.window.to_dict()
        data["scorers"] = list(self.scorers)
        return json.dumps(data, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Cursor:
        """Read `to_json`'s text (raises ValueError, KeyError or TypeError for anything else)."""
        data = json.loads(text)
        return cls(source=data["source"], filter=data["filter"], scorers=tuple(data["scorers"]),
                   window=Window.from_dict(data["window"]), token=data["token"], pages=int(data["pages"]),
                   traces=int(data["traces"]), done=bool(data["done"]))


def default_path(source: str, filter_text: str | None, scorers: Sequence[str], base: Path | None = None) -> Path:
    """The cursor file of a backfill when ``--cursor`` is not given.

    Example:
        >>> p = default_path("phoenix+http://h:6006/p", None, ["m:q"], Path("/w"))
        >>> (str(p.parent), p.suffix, p == default_path("phoenix+http://h:6006/p", None, ["m:q"], Path("/w")))
        ('/w/.tracescore/backfill', '.json', True)
    """
    digest = hashlib.sha256(json.dumps([source, filter_text, list(scorers)]).encode()).hexdigest()[:16]
    return (base or Path.cwd()) / STATE_DIR / f"{digest}.json"


def load(path: Path) -> Cursor | None:
    """The cursor in ``path`` (None when there is no file).

    Raises:
        ConfigError: the file is not a cursor file.

    Example:
        >>> load(Path("/nonexistent/cursor.json")) is None
        True
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as err:
        raise ConfigError(f"--cursor {path}: {err.strerror or err}") from None
    try:
        return Cursor.from_json(text)
    except (ValueError, KeyError, TypeError):
        raise ConfigError(f"--cursor {path}: not a tracescore cursor file") from None


def save(path: Path, cursor: Cursor) -> None:
    """Write ``cursor`` to ``path`` atomically (the folder is made when missing).

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> save(folder / "c.json", Cursor("phoenix+http://h/p", None, ("q",), pages=3))
        >>> load(folder / "c.json").pages, [p.name for p in folder.iterdir()]
        (3, ['c.json'])
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(cursor.to_json())
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
