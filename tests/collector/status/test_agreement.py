"""Judge agreement (SPEC §11): every figure of a series checked against one counted by hand
from the verdicts with plain formulas (not the library the code uses), on kept scores joined
with labels the way the store hands them over."""

from __future__ import annotations

import asyncio
import json
import math
import random
import statistics
from collections import Counter
from collections.abc import AsyncIterator, Sequence

from collector.common.labels import KeptScore, Label
from collector.config import ScorerConfig
from collector.status.agreement import AgreementReport, agreement_figures, measure, measure_scores
from collector.status.verdicts import ScorerRule, rules_from_config

KEYS = ["scorer", "version", "revision", "n", "n_scored", "accuracy", "kappa", "kappa_ci", "confusion", "mae",
        "rmse", "spearman", "annotators_kappa", "judge_mean", "corrected_mean", "corrected_ci"]
REL = "Answer relevancy"
SINCE = 1000.0


def trace(i: int) -> str:
    return f"{i:032x}"


def span(i: int) -> str:
    return f"{i + 1:016x}"


def score(i: int, x: float, *, revision: str = "r1", at: float = SINCE + 1, scorer: str = "relevancy",
          name: str = REL, label: str | None = None, span_id: str | None = "", session: str | None = None) -> KeptScore:
    return KeptScore(scorer, name, "1", revision, trace(i), span(i) if span_id == "" else span_id, session, x,
                     label, at)


def label(i: int, value: object, *, name: str = REL, annotator: str = "ana", at: float = 1.0,
          span_id: str | None = "", session: str | None = None, source: str = "file") -> Label:
    return Label(name, trace(i), span(i) if span_id == "" else span_id, session, value, source,  # type: ignore[arg-type]
                 annotator=annotator, rationale=f"why {i}", at=at)


def hand_kappa(human: Sequence[str], judge: Sequence[str]) -> float:
    n = len(human)
    po = sum(h == j for h, j in zip(human, judge, strict=True)) / n
    pe = sum((human.count(c) / n) * (judge.count(c) / n) for c in set(human) | set(judge))
    return (po - pe) / (1 - pe)


def hand_confusion(human: Sequence[str], judge: Sequence[str], order: Sequence[str]) -> dict[str, dict[str, int]]:
    counts = Counter(zip(human, judge, strict=True))
    return {h: {j: counts[(h, j)] for j in order} for h in order}


def hand_corrected(all_scores: Sequence[float], judge: Sequence[float], human: Sequence[float]) -> tuple[float, float]:
    diff = [h - j for h, j in zip(human, judge, strict=True)]
    mean = statistics.fmean(all_scores) + statistics.fmean(diff)
    half = 1.96 * math.sqrt(statistics.variance(all_scores) / len(all_scores) + statistics.variance(diff) / len(diff))
    return mean, half


def close(a: float | None, b: float, tol: float = 1e-9) -> bool:
    return a is not None and abs(a - b) <= tol


async def batches(scores: Sequence[KeptScore], size: int) -> AsyncIterator[list[KeptScore]]:
    for at in range(0, len(scores), size):
        yield list(scores[at:at + size])


def test_binary_series_agree_with_hand_counts_and_the_interval_is_fixed() -> None:
    rng = random.Random(7)
    rules = rules_from_config([(REL, "relevancy", ScorerConfig(ref="m:r", pass_threshold=0.7))])
    words = {True: [True, "yes", " PASS ", "1", "true"], False: [False, " No", "fail", "0", "FALSE"]}
    r1 = [score(i, round(rng.random(), 3)) for i in range(200)]
    old = [score(i, 0.9, at=SINCE - 1) for i in range(200, 240)]  # before the window
    r2 = [score(i, round(rng.random(), 3), revision="r2") for i in [*range(30), *range(300, 320)]]
    labels, truth = [], {}
    for i in [*range(0, 160, 2), 201, 305, 310]:  # 80 labels on r1's items (30 of them r2's too), one too old
        truth[i] = rng.random() < 0.6
        labels.append(label(i, rng.choice(words[truth[i]]), annotator=f"a{i % 3}"))

    report = measure_scores(old + r1 + r2, labels, rules, since=SINCE)
    one, two = report.series
    assert [(s.scorer, s.version, s.revision) for s in report.series] == [("relevancy", "1", "r1"), ("relevancy", "1", "r2")]
    assert report.unmatched == {REL: 1} and report.unreadable == []  # 201 was scored before the window only

    for series, scores in ((one, r1), (two, r2)):
        pairs = [(("pass" if truth[int(s.trace_id, 16)] else "fail"), ("pass" if s.score >= 0.7 else "fail"), s)
                 for s in scores if int(s.trace_id, 16) in truth]
        human, judge = [h for h, _, _ in pairs], [j for _, j, _ in pairs]
        assert series.n == len(pairs) and series.n_scored == len(scores)
        assert close(series.accuracy, sum(h == j for h, j in zip(human, judge, strict=True)) / len(pairs))
        assert close(series.kappa, hand_kappa(human, judge))
        assert series.confusion == hand_confusion(human, judge, ["pass", "fail"])
        assert close(series.judge_mean, statistics.fmean(s.score for s in scores))
        mean, half = hand_corrected([s.score for s in scores], [s.score for *_, s in pairs],
                                    [1.0 if h == "pass" else 0.0 for h in human])
        assert close(series.corrected_mean, mean) and series.corrected_ci is not None
        assert close(series.corrected_ci[0], mean - half) and close(series.corrected_ci[1], mean + half)
        assert series.mae is None and series.rmse is None and series.spearman is None
        assert series.annotators_kappa is None  # each item has one annotator: no two share 10 items
        assert series.kappa is not None and series.kappa_ci is not None
        assert series.kappa_ci[0] <= series.kappa <= series.kappa_ci[1] and series.kappa_ci[0] < series.kappa_ci[1]
        wrong = {s.span_id: s for h, j, s in pairs if h != j}
        assert {d["span_id"] for d in series.disagreements} == set(wrong)
        for d in series.disagreements:
            i = int(d["trace_id"], 16)
            assert d["score"] == wrong[d["span_id"]].score and d["label"] == labels_by_item(labels)[i].value
            assert (d["rationale"], d["annotator"], d["session_id"]) == (f"why {i}", f"a{i % 3}", None)
    assert (one.n, two.n) == (80, 17)

    # the same data gives the same interval; fed in batches to `measure`, the same report
    again = asyncio.run(measure(batches(r2 + old + r1, 37), labels, rules, since=SINCE))
    assert [s.to_json(True) for s in again.series] == [s.to_json(True) for s in report.series]
    assert again.series[0].kappa_ci == one.kappa_ci
    row = one.to_json()
    assert list(row) == KEYS and list(one.to_json(disagreements=True)) == [*KEYS, "disagreements"]
    json.dumps(one.to_json(True), allow_nan=False)
    assert agreement_figures(report) == {
        ("relevancy", "1", "r1", "kappa"): one.kappa, ("relevancy", "1", "r1", "accuracy"): one.accuracy,
        ("relevancy", "1", "r2", "kappa"): two.kappa, ("relevancy", "1", "r2", "accuracy"): two.accuracy}


def labels_by_item(labels: Sequence[Label]) -> dict[int, Label]:
    return {int(lb.trace_id, 16): lb for lb in labels}


def test_numeric_labels_give_errors_and_rho_and_pass_at_the_threshold() -> None:
    rules = {"Faithfulness": ScorerRule("faith", "Faithfulness", pass_threshold=0.6)}
    xs = [0.05 + 0.03 * i for i in range(30)]
    values = [round(min(1.0, max(0.0, x + (0.2 if i % 4 == 0 else -0.07 * (i % 3)))), 3) + i * 1e-4
              for i, x in enumerate(xs)]
    scores = [score(i, x, scorer="faith", name="Faithfulness") for i, x in enumerate(xs)]
    scores += [score(i, 0.5, scorer="faith", name="Faithfulness") for i in range(30, 40)]  # unlabelled
    assert len(set(values)) == 30  # Spearman by the rank formula below needs no ties
    labels = [label(i, v, name="Faithfulness") for i, v in enumerate(values)]
    labels.append(label(35, True, name="Faithfulness"))  # a boolean: a verdict and 1.0, not a numeric value

    (s,) = measure_scores(scores, labels, rules).series
    assert s.n == 31 and s.n_scored == 40
    assert close(s.mae, sum(abs(x - v) for x, v in zip(xs, values, strict=True)) / 30)
    assert close(s.rmse, math.sqrt(sum((x - v) ** 2 for x, v in zip(xs, values, strict=True)) / 30))
    rank_x = {x: r for r, x in enumerate(sorted(xs))}
    rank_v = {v: r for r, v in enumerate(sorted(values))}  # no ties among the values
    d2 = sum((rank_x[x] - rank_v[v]) ** 2 for x, v in zip(xs, values, strict=True))
    assert close(s.spearman, 1 - 6 * d2 / (30 * (30**2 - 1)))
    human = ["pass" if v >= 0.6 else "fail" for v in values] + ["pass"]
    judge = ["pass" if x >= 0.6 else "fail" for x in xs] + ["fail"]
    assert close(s.kappa, hand_kappa(human, judge)) and s.confusion == hand_confusion(human, judge, ["pass", "fail"])
    mean, half = hand_corrected([sc.score for sc in scores], [*xs, 0.5], [*values, 1.0])
    assert close(s.corrected_mean, mean) and s.corrected_ci is not None and close(s.corrected_ci[1], mean + half)
    assert agreement_figures(measure_scores(scores, labels, rules))[("faith", "1", "r1", "mae")] == s.mae


def test_annotators_majority_ties_and_their_own_kappa() -> None:
    rng = random.Random(3)
    n_items = 12
    scores = [score(i, rng.random()) for i in range(n_items)]
    shared = {"ana": n_items, "bob": n_items, "cyd": 9, "dan": 10}  # cyd shares 9 items with each: not enough
    labels: list[Label] = []
    for who, count in shared.items():
        for i in range(count):
            labels.append(label(i, rng.random() < 0.5, annotator=who, at=rng.uniform(1, 100)))
    labels.append(label(0, "maybe-later", annotator="ana", at=0.5))  # older than ana's label on item 0: replaced
    labels.append(label(1, True, annotator="ana", at=0.1, source="phoenix"))  # another source: another annotator
    newest = {}
    for lb in sorted(labels, key=lambda lb: lb.at):
        newest[(lb.source, lb.annotator, int(lb.trace_id, 16))] = lb
    by = {who: {i: "pass" if lb.value is True else "fail" for (src, w, i), lb in newest.items() if w == who and src == "file"}
          for who in shared}

    def majority(i: int) -> tuple[str, Label]:
        mine = [lb for (_, _, j), lb in newest.items() if j == i]
        votes = Counter(lb.value is True for lb in mine)
        top = max(votes.values())
        pick = max((lb for lb in mine if votes[lb.value is True] == top), key=lambda lb: lb.at)
        return ("pass" if pick.value is True else "fail"), pick

    report = measure_scores(scores, labels, {})
    (s,) = report.series
    assert report.unreadable == []  # "maybe-later" was replaced before it was read
    human = [majority(i)[0] for i in range(n_items)]
    judge = ["pass" if sc.score >= 0.5 else "fail" for sc in scores]
    assert s.n == n_items and close(s.kappa, hand_kappa(human, judge))
    assert s.confusion == hand_confusion(human, judge, ["pass", "fail"])
    votes = [Counter(lb.value is True for (_, _, j), lb in newest.items() if j == i) for i in range(n_items)]
    assert sum(v[True] == v[False] for v in votes) >= 2, "some items are ties, decided by their newest label"
    numbers = [statistics.fmean(1.0 if lb.value is True else 0.0 for (_, _, j), lb in newest.items() if j == i)
               for i in range(n_items)]
    mean, _ = hand_corrected([sc.score for sc in scores], [sc.score for sc in scores], numbers)
    assert close(s.corrected_mean, mean)
    for d in s.disagreements:
        _, pick = majority(int(d["trace_id"], 16))
        assert (d["annotator"], d["label"]) == (pick.annotator, pick.value)
    pairs = [("ana", "bob"), ("ana", "dan"), ("bob", "dan")]
    expected = statistics.fmean(hand_kappa([by[a][i] for i in sorted(by[a].keys() & by[b].keys())],
                                           [by[b][i] for i in sorted(by[a].keys() & by[b].keys())]) for a, b in pairs)
    assert close(s.annotators_kappa, expected)
    only_nine = [lb for lb in labels if lb.annotator in ("ana", "cyd") and lb.source == "file"]
    assert measure_scores(scores, only_nine, {}).series[0].annotators_kappa is None


def test_categories_unreadable_unmatched_trace_and_session_labels() -> None:
    rules = rules_from_config([
        ("Tone", "tone", ScorerConfig(ref="m:t", labels={"polite": 0.7, "neutral": 0.4, "rude": 0.0})),
        (REL, "relevancy", ScorerConfig(ref="m:r"))])
    assert rules["Tone"].categories == ("polite", "neutral", "rude")
    cats = ["polite", "neutral", "rude"]
    judged = [cats[i % 3] for i in range(20)] + ["sarcastic"]  # a judge label outside the categories
    said = [cats[(i * 7) % 5 % 3] for i in range(21)]
    scores = [score(i, 0.5, scorer="tone", name="Tone", label=judged[i]) for i in range(21)]
    labels = [label(i, f"  {said[i].upper()} ", name="Tone") for i in range(21)]
    labels += [label(30, 0.7, name="Tone"), label(31, "angry", name="Tone")]
    # a trace-level label meets both runs of its trace; a session label the session's score
    scores += [score(40, 0.9, span_id=span(40)), score(40, 0.8, span_id=span(41)), score(42, 0.2, span_id=span(42)),
               score(50, 0.95, span_id=None, session="chat-1")]
    labels += [label(40, True, span_id=None), label(99, True, span_id=None), label(0, "yes", span_id=None, session="chat-1")]
    labels += [label(60 + k, v) for k, v in enumerate(["maybe", float("nan"), None, [1, 2], float("inf")])]
    labels += [label(70, False, name="Ghost")]
    scores += [score(80, 0.2, scorer="brevity", name="Brevity"), score(81, 0.9, scorer="brevity", name="Brevity")]
    labels += [label(80, False, name="Brevity")]  # a scorer no longer configured: binary at 0.5

    report = measure_scores(scores, labels, rules)
    by_id = {s.scorer: s for s in report.series}
    tone, rel, brevity = by_id["tone"], by_id["relevancy"], by_id["brevity"]
    assert tone.n == 21 and close(tone.kappa, hand_kappa(said, judged))
    assert tone.confusion == hand_confusion(said, judged, [*cats, "sarcastic"])
    assert list(tone.confusion) == [*cats, "sarcastic"]
    assert tone.corrected_mean is None and tone.corrected_ci is None and tone.mae is None
    assert len(tone.disagreements) == sum(h != j for h, j in zip(said, judged, strict=True))

    assert (rel.n, rel.n_scored, rel.accuracy) == (3, 4, 1.0)  # span 42's trace has no label
    assert rel.kappa is None and rel.kappa_ci is None  # every verdict "pass": kappa is undefined, null in JSON
    assert rel.confusion == {"pass": {"pass": 3, "fail": 0}, "fail": {"pass": 0, "fail": 0}}
    assert {(d["span_id"], d["session_id"]) for d in rel.to_json(True)["disagreements"]} == set()
    assert json.loads(json.dumps(rel.to_json(True), allow_nan=False))["kappa"] is None
    assert (brevity.n, brevity.n_scored, brevity.accuracy, brevity.kappa_ci, brevity.corrected_ci) == (1, 2, 1.0, None, None)

    assert report.unmatched == {REL: 1, "Ghost": 1}
    reasons = {(lb.name, repr(lb.value)): why for lb, why in report.unreadable}
    assert len(reasons) == 7
    assert reasons[("Tone", "0.7")] == "0.7 is not one of the categories polite, neutral, rude"
    assert reasons[(REL, "'maybe'")].startswith("'maybe' is not a pass/fail word")
    assert reasons[(REL, "nan")] == "nan is not a finite number" and reasons[(REL, "None")] == "no value"
    assert reasons[(REL, "[1, 2]")] == "a list is not a verdict: [1, 2]"

    only: AgreementReport = measure_scores(scores, labels, rules, scorer="tone")
    assert [s.scorer for s in only.series] == ["tone"] and only.series[0].to_json() == tone.to_json()
    assert only.unmatched == {} and len(only.unreadable) == 2


def test_a_few_shot_revisions_own_examples_never_count_towards_its_agreement() -> None:
    """Items 0-2 were the examples of revision r2 (a span label, a trace label, a session label):
    their r2 scores are not paired with their labels; r1's scores of the same items are, as are r2's
    scores of the other items; the labels stay matched (not "unmatched")."""
    trace_label = label(1, True, span_id=None)  # a label on the whole trace: every run of it is that item
    labels = [label(0, True), trace_label, label(2, False, span_id=None, session="chat-2"), label(3, False),
              label(4, True)]
    scores = [score(i, x, revision=revision, session="chat-2" if i == 2 else None, span_id=None if i == 2 else "")
              for revision in ("r1", "r2") for i, x in enumerate((0.9, 0.8, 0.1, 0.2, 0.3))]
    exclude = {("relevancy", "r2"): frozenset({f"span:{span(0)}", trace_label.item, "session:chat-2"}),
               ("other", "r1"): frozenset({f"span:{span(3)}"})}  # another scorer's examples: no effect here
    report = asyncio.run(measure(batches(scores, 3), labels, {}, exclude=exclude))
    r1, r2 = report.series
    assert (r1.revision, r1.n, r1.n_scored, r1.accuracy) == ("r1", 5, 5, 0.8)  # item 4 (0.3, labelled pass) disagrees
    assert (r2.revision, r2.n, r2.n_scored, r2.accuracy) == ("r2", 2, 5, 0.5)  # items 3 and 4 only
    assert [d["span_id"] for d in r2.disagreements] == [span(4)] and report.unmatched == {}
    assert measure_scores(scores, labels, {}, exclude=exclude).series == report.series
