"""People's labels from a JSONL file (``tracescore labels import FILE.jsonl``, SPEC §11).

One JSON object a line::

    {"trace_id": "<32 hex>", "span_id": "<16 hex>" | null, "session_id": "..." | null,
     "name": "<scorer name>", "value": number | true | false | "<label>",
     "rationale": "..." (optional), "annotator": "..." (optional)}

A line names a run (``trace_id``, and ``span_id`` for one span of it) or a conversation
(``session_id``; a ``trace_id`` beside it is kept). Blank lines are skipped; other keys are
ignored. The first line that is not such an object stops the import with a `LabelFileError`
naming its line number, before anything of the file is kept. Each label is the file's
(``source = "file"``), given when the file was last written (``now`` when given), with
``source_id = "<file name>:<line>"``: importing the same file again changes nothing, and a
file written again replaces the labels of the same annotators and items.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from collector.common.labels import Label

__all__ = ["LabelFileError", "read_label_file"]

_TRACE_ID = re.compile(r"[0-9a-fA-F]{32}")
_SPAN_ID = re.compile(r"[0-9a-fA-F]{16}")


class LabelFileError(ValueError):
    """A line of a label file that is not a label; nothing of the file is imported.

    Example:
        >>> err = LabelFileError("labels.jsonl", 3, "no name")
        >>> str(err), err.line, err.message
        ('labels.jsonl:3: no name', 3, 'no name')
    """

    def __init__(self, path: str, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}")
        self.path = path
        self.line = line
        self.message = message


def _text(data: dict[str, Any], key: str, *, required: bool = False) -> str | None:
    """A string field (None when absent or null); raises ValueError when it is anything else."""
    value = data.get(key)
    if value is None:
        if required:
            raise ValueError(f'no "{key}"')
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise ValueError(f'"{key}" must be a {"non-empty " if required else ""}string, got {value!r}')
    return value


def label_of(data: Any, source_id: str, at: float) -> Label:
    """The label one line's object is.

    Raises:
        ValueError: what is wrong with it, in one sentence.

    Example:
        >>> label_of({"trace_id": "AB" * 16, "span_id": "cd" * 8, "name": "Q", "value": True}, "f:1", 5.0).item
        'span:cdcdcdcdcdcdcdcd'
        >>> label_of({"session_id": "chat-1", "name": "Q", "value": "pass", "annotator": "ana"}, "f:2", 5.0).identity
        ('Q', 'session:chat-1', 'file', 'ana')
        >>> label_of({"trace_id": "ab" * 16, "name": "Q", "value": [1]}, "f:3", 5.0)
        Traceback (most recent call last):
        ...
        ValueError: "value" must be a number, true, false or a label, got [1]
    """
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {json.dumps(data)[:60]}")
    name = _text(data, "name", required=True)
    trace_id, span_id, session_id = _text(data, "trace_id"), _text(data, "span_id"), _text(data, "session_id")
    if trace_id is not None and not _TRACE_ID.fullmatch(trace_id):
        raise ValueError(f'"trace_id" must be 32 hex digits, got {trace_id!r}')
    if span_id is not None and not _SPAN_ID.fullmatch(span_id):
        raise ValueError(f'"span_id" must be 16 hex digits, got {span_id!r}')
    if session_id is not None and not session_id.strip():
        raise ValueError('"session_id" must not be empty')
    if session_id is None and trace_id is None:
        raise ValueError('a label names a run ("trace_id") or a conversation ("session_id"): it has neither')
    if span_id is not None and trace_id is None:
        raise ValueError('"span_id" needs the "trace_id" of its trace')
    if "value" not in data:
        raise ValueError('no "value"')
    value = data["value"]
    if isinstance(value, bool) or isinstance(value, str):
        pass
    elif isinstance(value, (int, float)) and math.isfinite(value):
        value = float(value)
    else:
        raise ValueError(f'"value" must be a number, true, false or a label, got {json.dumps(value)[:60]}')
    return Label(str(name), (trace_id or "").lower(), span_id.lower() if span_id else None, session_id, value,
                 "file", annotator=_text(data, "annotator") or "", rationale=_text(data, "rationale"), at=at,
                 source_id=source_id)


def read_label_file(path: str | Path, *, now: float | None = None) -> list[Label]:
    """Every label of a JSONL label file (see the module docstring).

    Raises:
        LabelFileError: the first line that is not a label (not UTF-8, not JSON, or not a label's
            object), with its number and what is wrong.
        OSError: the file cannot be read.

    Example:
        >>> import tempfile, os
        >>> with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        ...     _ = f.write('{"trace_id": "' + "ab" * 16 + '", "name": "Q", "value": 1}\\n\\n{"name": "Q", "value": 0}\\n')
        >>> read_label_file(f.name)
        Traceback (most recent call last):
        ...
        collector.receive.labels.file.LabelFileError: ...:3: a label names a run ("trace_id") or a conversation ("session_id"): it has neither
        >>> os.unlink(f.name)
    """
    path = Path(path)
    at = path.stat().st_mtime if now is None else now
    labels: list[Label] = []
    for number, raw in enumerate(path.read_bytes().splitlines(), start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise LabelFileError(str(path), number, f"not UTF-8 text ({err.reason})") from None
        if not text.strip():
            continue
        try:
            data = json.loads(text, parse_constant=_no_constant)
        except ValueError as err:
            raise LabelFileError(str(path), number, f"not JSON: {err}") from None
        try:
            labels.append(label_of(data, f"{path.name}:{number}", at))
        except ValueError as err:
            raise LabelFileError(str(path), number, str(err)) from None
    return labels


def _no_constant(name: str) -> Any:
    """``NaN`` and ``Infinity`` are not JSON (Python's reader takes them by default)."""
    raise ValueError(f"{name} is not a JSON value")
