"""Records kept in memory between a store's write and this process's read of them back."""

from __future__ import annotations

from collector.store.kept import KeptRecords


def test_a_record_is_taken_once() -> None:
    kept = KeptRecords[str, object]()
    record = object()
    kept.keep("k", record, chars=10)
    assert kept.take("k") is record
    assert kept.take("k") is None and len(kept) == 0


def test_the_oldest_go_first_beyond_the_budget() -> None:
    kept = KeptRecords[int, str](budget_chars=100)
    for n in range(5):
        kept.keep(n, f"r{n}", chars=30)  # 150 characters offered, 90 fit
    assert [kept.take(n) for n in range(5)] == [None, None, "r2", "r3", "r4"]


def test_a_record_over_the_whole_budget_is_not_kept_and_evicts_nothing() -> None:
    kept = KeptRecords[str, str](budget_chars=100)
    kept.keep("small", "s", chars=40)
    kept.keep("huge", "h", chars=101)
    assert (kept.take("huge"), kept.take("small")) == (None, "s")


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
