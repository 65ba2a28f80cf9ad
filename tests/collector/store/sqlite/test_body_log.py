"""The body log: segment files of request bodies, written once and read back by position."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from collector.store.sqlite.body_log import BodyLog


def test_bodies_read_back_from_where_they_were_written(tmp_path: Path) -> None:
    log = BodyLog(str(tmp_path / "b"))
    log.open()
    places = [log.append(body) for body in (b"first", b"", b"third body")]
    log.sync()
    assert places == [(1, 0), (1, 5), (1, 5)]
    assert [log.read(s, o, n) for (s, o), n in zip(places, (5, 0, 10), strict=True)] == [b"first", b"", b"third body"]
    log.close()
    log.close()  # safe twice


def test_a_full_segment_rolls_over_and_each_process_starts_a_new_one(tmp_path: Path) -> None:
    log = BodyLog(str(tmp_path), segment_bytes=8)
    log.open()
    assert [log.append(b"12345"), log.append(b"67890"), log.append(b"x")] == [(1, 0), (2, 0), (2, 5)]
    log.sync()
    log.close()
    assert log.segments() == [1, 2]
    again = BodyLog(str(tmp_path), segment_bytes=8)
    again.open()
    assert again.current == 3 and again.append(b"y") == (3, 0)  # never appends after an old tail
    assert again.read(2, 5, 1) == b"x"
    again.close()


def test_delete_spares_the_segment_being_written(tmp_path: Path) -> None:
    log = BodyLog(str(tmp_path), segment_bytes=4)
    log.open()
    log.append(b"aaaa")
    log.append(b"bbbb")
    log.sync()
    log.delete([1, 2])
    assert log.segments() == [2]
    log.close()


def test_reading_past_a_segment_end_is_an_error(tmp_path: Path) -> None:
    log = BodyLog(str(tmp_path))
    log.open()
    log.append(b"abc")
    log.sync()
    with pytest.raises(OSError, match="ends before"):
        log.read(1, 1, 10)
    log.close()


def test_segments_are_private_to_the_daemon_user(tmp_path: Path) -> None:
    log = BodyLog(str(tmp_path))
    log.open()
    log.append(b"prompt text")
    log.close()
    assert os.stat(tmp_path / "00000001.seg").st_mode & 0o077 == 0


def test_append_before_open_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="not open"):
        BodyLog(str(tmp_path)).append(b"x")


def test_rolling_over_closes_the_finished_segment(tmp_path: Path) -> None:
    log = BodyLog(str(tmp_path), segment_bytes=4)
    log.open()
    log.append(b"aaaa")
    log.sync()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):  # every append starts a segment after a synced one
        log.append(b"bbbb")
        log.sync()
    assert len(os.listdir("/proc/self/fd")) == before  # one file open, not one per segment
    assert log.read(21, 0, 4) == b"bbbb"
    log.close()
