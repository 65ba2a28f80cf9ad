"""``tracescore labels import FILE.jsonl`` (`collector.receive.labels.read_label_file`, SPEC §11):
a good file becomes its labels; the first bad line stops the import with its number."""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.common.labels import Label
from collector.receive.labels import LabelFileError, read_label_file

TRACE, SPAN = "AB" * 16, "Cd" * 8
GOOD = [
    f'{{"trace_id": "{TRACE}", "span_id": "{SPAN}", "name": "Relevance", "value": true, "rationale": "right",'
    ' "annotator": "ana", "note": "other keys are ignored"}',
    "",
    f'{{"trace_id": "{TRACE.lower()}", "span_id": null, "session_id": null, "name": "Relevance", "value": 0}}',
    '{"session_id": "chat-7", "name": "Goal met", "value": "pass"}',
    f'{{"trace_id": "{TRACE}", "session_id": "chat-8", "name": "Goal met", "value": 0.25, "rationale": null}}',
]


def test_a_good_file_is_its_labels(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(GOOD) + "\n", encoding="utf-8")
    labels = read_label_file(path, now=1000.0)
    assert labels == [
        Label("Relevance", "ab" * 16, "cd" * 8, None, True, "file", annotator="ana", rationale="right", at=1000.0,
              source_id="labels.jsonl:1"),
        Label("Relevance", "ab" * 16, None, None, 0.0, "file", at=1000.0, source_id="labels.jsonl:3"),
        Label("Goal met", "", None, "chat-7", "pass", "file", at=1000.0, source_id="labels.jsonl:4"),
        Label("Goal met", "ab" * 16, None, "chat-8", 0.25, "file", at=1000.0, source_id="labels.jsonl:5"),
    ]
    assert [label.item for label in labels] == [f"span:{'cd' * 8}", f"trace:{'ab' * 16}", "session:chat-7",
                                                "session:chat-8"]
    assert isinstance(labels[0].value, bool) and isinstance(labels[1].value, float)
    assert read_label_file(str(path), now=5.0)[0].at == 5.0  # a str path too, and `now` is the labels' time


@pytest.mark.parametrize(("line", "says"), [
    ('{"trace_id": "' + TRACE + '", "name": "Relevance", "value": tru}', "not JSON"),
    ('{"trace_id": "' + TRACE + '", "value": 1}', 'no "name"'),
    ('{"trace_id": "' + TRACE + '", "name": "  ", "value": 1}', '"name" must be a non-empty string'),
    ('{"trace_id": "abc", "name": "Relevance", "value": 1}', '"trace_id" must be 32 hex digits'),
    ('{"trace_id": "' + "g" * 32 + '", "name": "Relevance", "value": 1}', '"trace_id" must be 32 hex digits'),
    ('{"trace_id": "' + TRACE + '", "span_id": "' + "a" * 15 + '", "name": "Relevance", "value": 1}',
     '"span_id" must be 16 hex digits'),
    ('{"name": "Relevance", "value": 1}', "it has neither"),
    ('{"span_id": "' + SPAN + '", "session_id": "c", "name": "Relevance", "value": 1}', '"span_id" needs'),
    ('{"trace_id": "' + TRACE + '", "name": "Relevance"}', 'no "value"'),
    ('{"trace_id": "' + TRACE + '", "name": "Relevance", "value": [1]}', '"value" must be a number'),
    ('{"trace_id": "' + TRACE + '", "name": "Relevance", "value": null}', '"value" must be a number'),
    ('{"trace_id": "' + TRACE + '", "name": "Relevance", "value": NaN}', "not JSON: NaN is not a JSON value"),
    ('{"trace_id": "' + TRACE + '", "name": "Relevance", "value": 1, "annotator": 7}', '"annotator" must be a'),
    ('["not", "an", "object"]', "expected a JSON object"),
])
def test_the_first_bad_line_stops_the_import_with_its_number(tmp_path: Path, line: str, says: str) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join([GOOD[0], "", line, GOOD[3], "{not even json"]) + "\n", encoding="utf-8")
    with pytest.raises(LabelFileError) as caught:
        read_label_file(path)
    assert caught.value.line == 3  # the blank line counts: the number is the file's own
    assert says in caught.value.message
    assert str(caught.value) == f"{path}:3: {caught.value.message}"


def test_a_line_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_bytes(GOOD[0].encode() + b"\n" + b'{"name": "\xff"}\n')
    with pytest.raises(LabelFileError, match=r":2: not UTF-8 text") as caught:
        read_label_file(path)
    assert caught.value.line == 2
