"""The FILE arguments of ``inspect`` and ``score``: files, directories and glob patterns.

A directory stands for every OTLP file under it (recursively: ``.pb`` and ``.json``,
optionally ``.gz``, logs files included), a pattern with ``*``, ``?`` or ``[`` for the
files it matches (``**`` crosses directories), anything else for itself. Each file is
named once, in the order given (sorted within a directory or a pattern).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

OTLP_SUFFIXES = (".pb", ".json", ".pb.gz", ".json.gz")
"""Names of the files a directory contributes."""


@dataclass
class Expanded:
    """The files named by the arguments, and the arguments that named none.

    Example:
        >>> Expanded(["a.pb"]).empty
        []
    """

    files: list[str] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)


def _is_pattern(arg: str) -> bool:
    return glob.has_magic(arg)  # type: ignore[attr-defined]  # public since 3.0, untyped


def _otlp_files_under(directory: str) -> list[str]:
    found: list[str] = []
    for root, dirs, names in os.walk(directory):
        dirs.sort()
        found.extend(os.path.join(root, n) for n in sorted(names) if n.lower().endswith(OTLP_SUFFIXES))
    return found


def expand_paths(args: Sequence[str]) -> Expanded:
    """Expand directories and patterns into files (see the module docstring).

    Example:
        >>> import pathlib, tempfile
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> for name in ("a/S1.pb", "a/S1.logs.pb", "a/notes.txt", "b/S2.json"):
        ...     (root / name).parent.mkdir(exist_ok=True); _ = (root / name).write_bytes(b"")
        >>> got = expand_paths([str(root / "a"), str(root / "*" / "*.json"), str(root / "none*")])
        >>> [pathlib.Path(f).relative_to(root).as_posix() for f in got.files], len(got.empty)
        (['a/S1.logs.pb', 'a/S1.pb', 'b/S2.json'], 1)
    """
    out = Expanded()
    seen: set[str] = set()
    for arg in args:
        if os.path.isdir(arg):
            files = _otlp_files_under(arg)
        elif _is_pattern(arg) and not os.path.exists(arg):
            files = sorted(f for f in glob.glob(arg, recursive=True) if os.path.isfile(f))
        else:
            files = [arg]  # a file, or a missing one: reading it reports the problem
        if not files:
            out.empty.append(arg)
        for path in files:
            if path not in seen:
                seen.add(path)
                out.files.append(path)
    return out
