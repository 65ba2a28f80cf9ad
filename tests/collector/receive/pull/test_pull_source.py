"""``--from`` URLs and ``--since``/``--until`` times (`collector.receive.pull.source`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from collector.common.errors import ConfigError
from collector.receive.pull.source import Source, Window, iso, mask_url, parse_source, parse_time

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("text", "expected"), [
    ("phoenix+http://127.0.0.1:6006/support-bot", Source("phoenix", "http://127.0.0.1:6006", "support-bot")),
    ("phoenix+http://127.0.0.1:6006/", Source("phoenix", "http://127.0.0.1:6006", "default")),
    ("phoenix+https://phoenix.example.com/my%20project", Source("phoenix", "https://phoenix.example.com",
                                                                "my project")),
    ("phoenix+http://h/prefix/phoenix/p", Source("phoenix", "http://h/prefix/phoenix", "p")),
    ("mlflow+http://127.0.0.1:5000/3", Source("mlflow", "http://127.0.0.1:5000", "3")),
    ("mlflow+http://[::1]:5000/3", Source("mlflow", "http://[::1]:5000", "3")),
    ("langfuse+https://cloud.langfuse.com", Source("langfuse", "https://cloud.langfuse.com")),
    ("langfuse+http://localhost:3000/", Source("langfuse", "http://localhost:3000")),
    ("langfuse+https://pk-lf-1:sk-lf-2@cloud.langfuse.com", Source("langfuse", "https://cloud.langfuse.com", "",
                                                                   "pk-lf-1", "sk-lf-2")),
])
def test_from_urls_name_the_backend_its_base_url_and_target(text: str, expected: Source) -> None:
    assert parse_source(text) == expected


@pytest.mark.parametrize(("text", "problem"), [
    ("http://127.0.0.1:6006/p", "write phoenix+http://127.0.0.1:6006/p (the backend, '+', then the server's "
                                "http(s) URL: phoenix+http://HOST:6006/PROJECT, mlflow+http://HOST:5000/EXPERIMENT_ID "
                                "or langfuse+https://HOST)"),
    ("phoenix://127.0.0.1:6006/support-bot", "write phoenix+http://127.0.0.1:6006/support-bot ("),
    ("phoenix:https://h/p", "write phoenix+https://h/p ("),
    ("mlflow://h:5000", "write mlflow+http://h:5000/<experiment id> ("),
    ("http://h:8080/x", "write phoenix+http://h:8080/x or mlflow+http://h:8080/x or langfuse+http://h:8080/x ("),
    ("tempo+http://h:3200", "expected the backend phoenix, mlflow or langfuse, not 'tempo' (the backend, '+'"),
    ("phoenix+ftp://h/p", "write phoenix+http://h/p ("),
    ("phoenix+http:///p", "no server named; expected phoenix+http://HOST:6006/PROJECT"),
    ("mlflow+http://h:5000/", "name the experiment id"),
    ("mlflow+http://h:99999/1", "Port out of range"),
])
def test_a_bad_from_url_says_what_is_expected(text: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=r"^--from ") as caught:
        parse_source(text)
    assert problem in str(caught.value)


def test_credentials_never_appear_in_what_is_printed() -> None:
    source = parse_source("langfuse+https://pk:s3cret@h")
    assert "s3cret" not in str(source) and "s3cret" not in repr(Source("x", "y"))
    with pytest.raises(ConfigError) as caught:
        parse_source("phoenix+ftp://u:s3cret@h/p")
    assert "s3cret" not in str(caught.value)
    assert mask_url("x+http://u:p@h:1/a http://v:q@h") == "x+http://u:***@h:1/a http://v:***@h"


@pytest.mark.parametrize(("text", "ago"), [
    ("45s", timedelta(seconds=45)), ("15m", timedelta(minutes=15)), ("12h", timedelta(hours=12)),
    ("7d", timedelta(days=7)), ("2w", timedelta(weeks=2)), ("1.5h", timedelta(minutes=90)), (" 3d ", timedelta(days=3)),
])
def test_relative_times_count_back_from_now(text: str, ago: timedelta) -> None:
    assert parse_time(text, NOW) == NOW - ago


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-12-01", datetime(2026, 12, 1, tzinfo=UTC)),
    ("2026-12-01T10:30:00", datetime(2026, 12, 1, 10, 30, tzinfo=UTC)),
    ("2026-12-01T10:30:00Z", datetime(2026, 12, 1, 10, 30, tzinfo=UTC)),
    ("2026-12-01T10:30:00.123456+01:00", datetime(2026, 12, 1, 9, 30, 0, 123456, tzinfo=UTC)),
])
def test_iso_times_are_utc(text: str, expected: datetime) -> None:
    assert parse_time(text, NOW) == expected
    assert parse_time(text, NOW).tzinfo is UTC


@pytest.mark.parametrize("text", ["yesterday", "7 days", "-3d", "2026-13-01", "7y", ""])
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="expected an ISO 8601 time"):
        parse_time(text, NOW)


def test_a_window_round_trips_and_gives_milliseconds() -> None:
    window = Window(datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC))
    assert Window.from_dict(window.to_dict()) == window
    assert (window.since_ms, window.until_ms) == (1796083200000, 1796169600000)
    assert iso(window.until) == "2026-12-02T00:00:00.000000Z"
