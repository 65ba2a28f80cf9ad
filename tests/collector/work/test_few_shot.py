"""Few-shot example sets (SPEC §11) chosen from a real store's labels and what its judge was shown:
balanced across verdicts, newest first, the people's verdict (majority) and rationale; one set in
the store that every replica reads; replaced at most every ``poll_s`` and only under the label
lease; the judge revision with the examples' keys, and the items each revision may not be
credited with."""

from __future__ import annotations

from pathlib import Path

from collector.common.few_shot import Example, ExampleSet, Shown, balanced, examples_text
from collector.common.labels import Label, judge_revision
from collector.config import ScorerConfig
from collector.store.sqlite.store import SqliteStore
from collector.work.agreement import scorer_rules
from collector.work.few_shot import FewShot, candidates, example_exclusions, revisions_in_force
from collector.work.registry import RegisteredScorer
from scorers import Judge, create_scorer

NAME = "Helpful"


def span(i: int) -> str:
    return f"{i + 1:016x}"


def trace(i: int) -> str:
    return f"{i + 1:032x}"


def label(i: int, value: object, at: float, *, annotator: str = "ana", whole_trace: bool = False,
          name: str = NAME) -> Label:
    return Label(name, trace(i), None if whole_trace else span(i), None, value, "file",  # type: ignore[arg-type]
                 annotator=annotator, rationale=f"{annotator} on {i}", at=at, source_id=f"labels.jsonl:{i}:{annotator}")


async def test_a_balanced_newest_first_set_is_chosen_once_for_every_replica(tmp_path: Path) -> None:
    judge = Judge("openai/gpt-4o-mini", "Rate how helpful the answer is.")
    scorer = create_scorer(id="helpful", name=NAME, description="d", judge=judge).generate_score(
        description="score", create_prompt=lambda run: "?")
    entry = RegisteredScorer(scorer, ScorerConfig(ref="m:helpful", few_shot=3))
    rules = scorer_rules([entry])
    store = SqliteStore(str(tmp_path / "q.db"))
    await store.start()
    try:
        await store.keep_shown([Shown("helpful", trace(i), span(i), None, f"Answer {i}", 100.0 + i) for i in range(7)],
                               max_per_scorer=100, retain_s=1e6)
        await store.put_labels([
            label(0, True, 1.0), label(1, "pass", 2.0), label(2, 1, 3.0),
            label(3, False, 4.0), label(3, "no", 4.5, annotator="ben"),  # two people agree: ben's is the newest
            label(4, False, 5.0), label(5, "maybe", 9.0),  # not a verdict: no example
            label(6, False, 6.0, whole_trace=True),  # a whole trace: its run's content
            label(7, True, 10.0),  # the newest, but its judge's content is not kept: no example
            label(0, False, 11.0, name="Other scorer")])
        found = await candidates(store, "helpful", await store.labels(), rules[NAME])
        by_item = {e.item: e for e in found}
        assert sorted(by_item) == sorted([f"span:{span(i)}" for i in range(5)] + [f"trace:{trace(6)}"])
        three = by_item[f"span:{span(3)}"]
        assert (three.id, three.content, three.verdict, three.rationale, three.at) == (
            "labels.jsonl:3:ben", "Answer 3", "fail", "ben on 3", 4.5)
        assert [e.item for e in balanced(found, 5, ("pass", "fail"))] == [
            f"span:{span(2)}", f"trace:{trace(6)}", f"span:{span(1)}", f"span:{span(4)}", f"span:{span(0)}"]

        replica_a = FewShot(store, [entry], rules, holder="a:examples", poll_s=300.0)
        replica_b = FewShot(store, [entry], rules, holder="b:examples", poll_s=300.0)
        assert replica_a.in_force(entry) is not None and replica_a.in_force(entry).text == ""  # type: ignore[union-attr]
        await replica_a.refresh(choose=True)
        await replica_b.refresh()  # reads what a chose
        chosen = [by_item[f"span:{span(2)}"], by_item[f"trace:{trace(6)}"], by_item[f"span:{span(1)}"]]
        revision = judge_revision(entry.judges, [e.key for e in chosen])
        for replica in (replica_a, replica_b):
            shot = replica.in_force(entry)
            assert shot is not None and (shot.text, shot.revision) == (examples_text(chosen), revision)
        assert revision != entry.judge_revision
        assert await revisions_in_force(store, [entry]) == {("helpful", None): revision}
        assert await example_exclusions(store, ["helpful", "nobody"]) == {
            ("helpful", revision): frozenset(e.item for e in chosen)}

        await store.put_labels([label(4, True, 20.0, annotator="cy"), label(4, True, 21.0, annotator="di")])
        await replica_b.refresh(choose=True)  # chosen less than poll_s ago: kept
        assert replica_b.in_force(entry).revision == revision  # type: ignore[union-attr]
        eager = FewShot(store, [entry], rules, holder="b:examples", poll_s=0.0)
        assert await store.take_label_lease("a:puller", 60.0)  # another process pulls labels: no choosing now
        await eager.refresh(choose=True)
        assert eager.in_force(entry).revision == revision  # type: ignore[union-attr]
        await store.release_label_lease("a:puller")
        await eager.refresh(choose=True)
        now = eager.in_force(entry)
        item_4 = [e for e in await candidates(store, "helpful", await store.labels(), rules[NAME])
                  if e.item == f"span:{span(4)}"]
        assert now is not None and now.text == examples_text([item_4[0], chosen[1], chosen[0]])  # 4 is pass now
        assert item_4[0].verdict == "pass" and item_4[0].rationale == "di on 4"
        stored = ExampleSet.from_json(await store.label_cursor("@examples:helpful") or "")
        assert stored.revision == now.revision and stored.past == ((revision, tuple(e.item for e in chosen)),)
        assert set(await example_exclusions(store, ["helpful"])) == {("helpful", revision), ("helpful", now.revision)}
    finally:
        await store.shutdown()


def test_examples_read_in_the_documented_format_and_change_the_revision_with_any_part() -> None:
    a = Example("lbl-1", "Answer: Paris\nRate it.", "pass", "names the city")
    b = Example("lbl-2", "Answer: Lyon", "fail", None)
    assert examples_text([a, b]) == (
        "Examples judged by people: each gives the content a judge was shown, then the people's verdict and "
        "rationale.\n\n"
        '<example n="1">\n<content>\nAnswer: Paris\nRate it.\n</content>\n<verdict>pass</verdict>\n'
        "<rationale>names the city</rationale>\n</example>\n\n"
        '<example n="2">\n<content>\nAnswer: Lyon\n</content>\n<verdict>fail</verdict>\n<rationale></rationale>\n'
        "</example>")
    keys = {Example("lbl-1", *parts).key for parts in (("c", "pass", "r"), ("c2", "pass", "r"), ("c", "fail", "r"),
                                                         ("c", "pass", "r2"), ("c", "pass", None))}
    assert len(keys) == 5 and all(key.startswith("lbl-1#") for key in keys)
