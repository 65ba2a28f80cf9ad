"""Judge agreement (SPEC §11): how long `collector.status.agreement.measure` takes over a
million kept scores, and how much memory it holds while it does.

The kept scores are made by a generator, in batches of ``--batch`` (default 10,000, as the
store scans them): ``--scores`` (default 1,000,000) over 4 scorers (two binary, one with
numeric labels, one categorical) and 2 judge revisions each, every run scored by each
scorer and revision. About ``--labels`` (default 5,000) labels are on the first runs: span
labels, trace-level labels, a second annotator on some items, plus labels that meet no score
and labels that cannot be read.

Passes over the same data:

* ``generate``: the generator alone (every batch made and dropped), the cost that is not
  `measure`'s;
* ``measure``: `measure` over the generator; its time less the generator's is what the join
  and the statistics cost, per kept score; the growth of the peak RSS is measured in this
  pass (the generate pass has already peaked at one batch);
* with ``--tracemalloc``, `measure` again under tracemalloc, for the peak of what Python
  allocated, batches included (about 30 s more: tracemalloc traces every allocation).

    .venv/bin/python bench/agreement.py
    .venv/bin/python bench/agreement.py --tracemalloc
    .venv/bin/python bench/agreement.py --scores 200000 --labels 2000
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collector.common.labels import KeptScore, Label  # noqa: E402
from collector.status.agreement import AgreementReport, measure  # noqa: E402
from collector.status.verdicts import ScorerRule  # noqa: E402

SCORERS = (
    ScorerRule("relevancy", "Answer relevancy", 0.5),
    ScorerRule("faithfulness", "Faithfulness", 0.7),
    ScorerRule("quality", "Quality", 0.6),  # its labels are numbers
    ScorerRule("tone", "Tone", categories=("polite", "neutral", "rude")),
)
REVISIONS = ("3f2a9c1e", "b71d0a44")
PER_RUN = len(SCORERS) * len(REVISIONS)


def judge_score(run: int, scorer: int, revision: int) -> float:
    """A deterministic score in [0, 1) for a run, scorer and revision (cheap, no RNG state)."""
    return ((run * 2654435761 + scorer * 40503 + revision * 7919) % 10007) / 10007


def category(x: float) -> str:
    return "polite" if x >= 0.7 else "neutral" if x >= 0.4 else "rude"


def trace_of(run: int) -> str:
    return f"{run:032x}"


def span_of(run: int) -> str:
    return f"{run + 1:016x}"


async def kept_scores(total: int, batch: int) -> AsyncIterator[list[KeptScore]]:
    """``total`` kept scores in batches of ``batch``: run after run, each scored by every
    scorer and revision."""
    out: list[KeptScore] = []
    runs = -(-total // PER_RUN)
    made = 0
    for run in range(runs):
        trace, span = trace_of(run), span_of(run)
        for s, rule in enumerate(SCORERS):
            for r, revision in enumerate(REVISIONS):
                if made == total:
                    break
                x = judge_score(run, s, r)
                out.append(KeptScore(rule.scorer_id, rule.name, "1", revision, trace, span, None, x,
                                     category(x) if rule.categorical else None, 1_000.0 + run))
                made += 1
                if len(out) == batch:
                    yield out
                    out = []
    if out:
        yield out


def make_labels(count: int, runs: int) -> list[Label]:
    """About ``count`` labels over the first runs: mostly agreeing with revision 0's score,
    some trace-level, some with a second annotator, some unmatched, some unreadable."""
    labels: list[Label] = []
    run = 0
    while len(labels) < count and run < runs:
        for s, rule in enumerate(SCORERS):
            x = judge_score(run, s, 0)
            wrong = (run * 31 + s) % 5 == 0  # the human disagrees on a fifth of the items
            if rule.categorical:
                value: float | bool | str = category(1 - x if wrong else x)
            elif rule.name == "Quality":
                value = round(min(1.0, max(0.0, x + (0.4 if wrong else 0.05))), 3)
            else:
                value = (x >= rule.pass_threshold) != wrong
            span = None if run % 10 == 0 else span_of(run)  # a tenth are labels on the whole trace
            labels.append(Label(rule.name, trace_of(run), span, None, value, "phoenix", "ana", at=float(run)))
            if run % 4 == 0:
                labels.append(Label(rule.name, trace_of(run), span, None, value, "file", "bob", at=float(run) + 1))
        run += 1
    labels += [Label("Answer relevancy", trace_of(runs + k), None, None, True, "file") for k in range(100)]
    labels += [Label("Faithfulness", trace_of(k), span_of(k), None, "maybe", "file", "cyd") for k in range(20)]
    return labels


async def generate_only(total: int, batch: int) -> int:
    seen = 0
    async for scores in kept_scores(total, batch):
        seen += len(scores)
    return seen


def rss_mb() -> float:
    """The process's peak RSS so far (MB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scores", type=int, default=1_000_000)
    parser.add_argument("--labels", type=int, default=5_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--tracemalloc", action="store_true", help="a third pass under tracemalloc")
    args = parser.parse_args()
    rules = {rule.name: rule for rule in SCORERS}
    labels = make_labels(args.labels, -(-args.scores // PER_RUN))

    async def run() -> AgreementReport:
        return await measure(kept_scores(args.scores, args.batch), labels, rules)

    asyncio.run(measure(kept_scores(1_000, 1_000), labels[:100], rules))  # imports sklearn and scipy once

    started = time.perf_counter()
    seen = asyncio.run(generate_only(args.scores, args.batch))
    generate_s = time.perf_counter() - started

    before = rss_mb()
    started = time.perf_counter()
    report = asyncio.run(run())
    measure_s = time.perf_counter() - started
    grown = rss_mb() - before

    traced = ""
    if args.tracemalloc:
        tracemalloc.start()
        asyncio.run(run())
        traced = f"; tracemalloc peak {tracemalloc.get_traced_memory()[1] / 2**20:.1f} MB"
        tracemalloc.stop()

    print(f"agreement: {seen:,} kept scores in batches of {args.batch:,}, {len(labels):,} labels, "
          f"{len(report.series)} series")
    print(f"generate: {generate_s:.2f} s")
    print(f"measure: {measure_s:.2f} s (join and statistics: {measure_s - generate_s:.2f} s, "
          f"{(measure_s - generate_s) / seen * 1e6:.2f} us per kept score)")
    print(f"memory: peak RSS growth {grown:.1f} MB{traced}")
    print(f"unmatched: {report.unmatched}; unreadable: {len(report.unreadable)}")
    for s in report.series:
        row = s.to_json()
        print(f"  {row['scorer']:<12} {row['revision']}  n={row['n']:<5} n_scored={row['n_scored']:<7} "
              f"accuracy={row['accuracy']} kappa={row['kappa']} {row['kappa_ci']} mae={row['mae']} "
              f"annotators={row['annotators_kappa']} corrected={row['corrected_mean']}")


if __name__ == "__main__":
    main()
