"""Records kept in memory between a store's write and this process's read of them back."""

from __future__ import annotations

from collector.store.kept import KeptRecords


def test_a_record_is_taken_once() -> None:
    kept = KeptRecords[str, object]()
    record = object()
    kept.keep("k", record, chars=10)
    assert kept.take("k") is record
    assert kept.take("k") is None and len(kept) == 0


def test_beyond_the_budget_new_records_are_not_kept_until_old_ones_are_read() -> None:
    # Rows are read back oldest first: the records kept are the ones read next.
    kept = KeptRecords[int, str](budget_chars=100)
    for n in range(5):
        kept.keep(n, f"r{n}", chars=30)  # 150 characters offered, 90 fit
    assert [kept.take(n) for n in range(5)] == ["r0", "r1", "r2", None, None]
    kept.keep(5, "r5", chars=100)  # the budget is whole again once they were read
    assert kept.take(5) == "r5"


def test_a_record_left_unread_too_long_is_dropped() -> None:
    kept = KeptRecords[str, str](budget_chars=100, max_age_s=60)
    kept.keep("stale", "s", chars=90, now=0.0)  # its row left otherwise: never read back
    kept.keep("fresh", "f", chars=90, now=61.0)  # fits: the stale one was dropped
    assert (kept.take("stale"), kept.take("fresh")) == (None, "f")


def test_keeping_a_key_again_replaces_it_and_its_size() -> None:
    kept = KeptRecords[str, str](budget_chars=100)
    kept.keep("a", "old", chars=90)
    kept.keep("a", "new", chars=50)
    kept.keep("b", "other", chars=50)  # fits only if "a" counts 50 now, not 140
    assert (kept.take("a"), kept.take("b")) == ("new", "other")


def test_clear_forgets_everything() -> None:
    kept = KeptRecords[str, str](budget_chars=100)
    kept.keep("a", "x", chars=60)
    kept.clear()
    kept.keep("b", "y", chars=60)  # the budget is whole again
    assert (kept.take("a"), kept.take("b")) == (None, "y")
