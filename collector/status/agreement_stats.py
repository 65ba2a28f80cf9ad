"""The statistics of judge agreement (SPEC §11): Cohen's kappa with its bootstrap interval,
accuracy, the confusion matrix, the errors of numeric labels, the corrected mean, and the
annotators' own kappa.

Every figure that cannot be computed (no pairs, constant verdicts, one item) is None, never
NaN, so that it reads as null in JSON. scikit-learn and scipy are imported inside the
functions: the daemon and the CLI import this module, and importing sklearn costs about a
second.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import numpy as np

__all__ = ["BOOTSTRAP_SEED", "Running", "accuracy", "annotators_kappa", "confusion", "corrected_mean",
           "kappa", "kappa_interval", "numeric_errors"]

BOOTSTRAP_SEED = 20240611
"""The bootstrap's fixed seed: the same pairs always give the same interval."""

_Who = TypeVar("_Who", bound=Hashable)

RESAMPLES = 1000
MIN_SHARED = 10
"""Items two annotators must both have labelled for their kappa to count (SPEC §11)."""


@dataclass
class Running:
    """Count, mean and variance of a stream of numbers in constant memory (Welford).

    Example:
        >>> r = Running()
        >>> for x in (2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0):
        ...     r.add(x)
        >>> r.count, r.mean, round(r.variance, 4)
        (8, 5.0, 4.5714)
    """

    count: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def add(self, x: float) -> None:
        """Take one more number."""
        self.count += 1
        delta = x - self.mean
        self.mean += delta / self.count
        self.m2 += delta * (x - self.mean)

    @property
    def variance(self) -> float:
        """The sample variance (n - 1); 0.0 under two numbers."""
        return self.m2 / (self.count - 1) if self.count > 1 else 0.0


def _finite(x: Any) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def kappa(human: Sequence[str], judge: Sequence[str]) -> float | None:
    """Cohen's kappa between paired verdicts (None: no pairs, or both sides constant and equal).

    Example:
        >>> kappa(["pass", "pass", "fail", "fail"], ["pass", "fail", "fail", "fail"])
        0.5
        >>> kappa(["pass", "pass"], ["pass", "pass"]) is None
        True
    """
    if not human:
        return None
    import numpy as np
    from sklearn.metrics import cohen_kappa_score

    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _finite(cohen_kappa_score(list(human), list(judge)))


def _codes(human: Sequence[str], judge: Sequence[str]) -> tuple[np.ndarray, np.ndarray, int]:
    import numpy as np

    order = {v: i for i, v in enumerate(sorted(set(human) | set(judge)))}
    return (np.fromiter((order[v] for v in human), dtype=np.int16, count=len(human)),
            np.fromiter((order[v] for v in judge), dtype=np.int16, count=len(judge)), len(order))


def _kappa_statistic(k: int) -> Any:
    """Cohen's kappa along the last axis of integer-coded verdicts (vectorised for the
    bootstrap's resamples; the same formula as sklearn's). A resample with one verdict on both
    sides agrees perfectly and counts as 1."""

    import numpy as np

    def statistic(h: np.ndarray, j: np.ndarray, axis: int = -1) -> np.ndarray:
        po = np.mean(h == j, axis=axis)
        pe = sum(np.mean(h == c, axis=axis) * np.mean(j == c, axis=axis) for c in range(k))
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(pe < 1.0, (po - pe) / (1.0 - pe), 1.0)

    return statistic


def kappa_interval(human: Sequence[str], judge: Sequence[str], *, seed: int = BOOTSTRAP_SEED,
                   resamples: int = RESAMPLES) -> tuple[float, float] | None:
    """The 95% percentile-bootstrap interval of Cohen's kappa (pairs resampled together,
    fixed seed). None under two pairs or when kappa itself is undefined.

    Example:
        >>> human = ["pass"] * 30 + ["fail"] * 20
        >>> judge = ["pass"] * 25 + ["fail"] * 5 + ["fail"] * 17 + ["pass"] * 3
        >>> low, high = kappa_interval(human, judge)
        >>> low < kappa(human, judge) < high, (low, high) == kappa_interval(human, judge)
        (True, True)
    """
    if len(human) < 2 or len(set(human) | set(judge)) < 2:  # one verdict on both sides: kappa is undefined
        return None
    import numpy as np
    from scipy.stats import bootstrap

    h, j, k = _codes(human, judge)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a degenerate distribution (every resample agrees) is fine here
        result = bootstrap((h, j), _kappa_statistic(k), n_resamples=resamples, batch=200, vectorized=True,
                           paired=True, method="percentile", confidence_level=0.95,
                           random_state=np.random.default_rng(seed))
    low, high = _finite(result.confidence_interval.low), _finite(result.confidence_interval.high)
    return None if low is None or high is None else (low, high)


def accuracy(human: Sequence[str], judge: Sequence[str]) -> float | None:
    """The share of pairs where the judge's verdict is the human's (None: no pairs).

    Example:
        >>> accuracy(["pass", "fail", "fail", "pass"], ["pass", "fail", "pass", "pass"])
        0.75
    """
    if not human:
        return None
    from sklearn.metrics import accuracy_score

    return float(accuracy_score(list(human), list(judge)))


def confusion(human: Sequence[str], judge: Sequence[str], order: Sequence[str]) -> dict[str, dict[str, int]]:
    """Human verdict -> judge verdict -> count, over every verdict of ``order`` and any other
    that occurs (after them, sorted).

    Example:
        >>> confusion(["pass", "fail", "fail"], ["pass", "pass", "fail"], ["pass", "fail"])
        {'pass': {'pass': 1, 'fail': 0}, 'fail': {'pass': 1, 'fail': 1}}
    """
    labels = list(order) + sorted((set(human) | set(judge)) - set(order))
    if not human:
        return {h: dict.fromkeys(labels, 0) for h in labels}
    from sklearn.metrics import confusion_matrix

    matrix = confusion_matrix(list(human), list(judge), labels=labels)
    return {h: {j: int(matrix[a, b]) for b, j in enumerate(labels)} for a, h in enumerate(labels)}


def numeric_errors(scores: Sequence[float], values: Sequence[float]) -> tuple[float | None, float | None, float | None]:
    """MAE, RMSE and Spearman's rho between judge scores and numeric human labels (None where
    there are no pairs; rho None under two pairs or when a side is constant).

    Example:
        >>> [round(x, 4) for x in numeric_errors([0.9, 0.4, 0.3], [1.0, 0.5, 0.0])]
        [0.1667, 0.1915, 1.0]
    """
    if not scores:
        return None, None, None
    from sklearn.metrics import mean_absolute_error, mean_squared_error

    mae = _finite(mean_absolute_error(values, scores))
    rmse = _finite(math.sqrt(mean_squared_error(values, scores)))
    rho = None
    if len(scores) >= 2:
        from scipy.stats import spearmanr

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a constant side: rho is undefined (NaN -> None)
            rho = _finite(spearmanr(scores, values)[0])
    return mae, rmse, rho


def corrected_mean(judge_all: Running, judge: Sequence[float],
                   human: Sequence[float]) -> tuple[float | None, tuple[float, float] | None]:
    """The prediction-powered mean: ``mean(judge, all) + mean(human - judge, labelled)``, and
    its 95% interval ``± 1.96 sqrt(var(judge, all)/N + var(human - judge, labelled)/n)``
    (None without labelled pairs; the interval None under two of either).

    Example:
        >>> everything = Running()
        >>> for x in (0.8, 0.6, 0.9, 0.7):
        ...     everything.add(x)
        >>> mean, (low, high) = corrected_mean(everything, [0.8, 0.6], [1.0, 0.0])
        >>> round(mean, 4), round(high - mean, 4)
        (0.55, 0.7941)
    """
    n = len(judge)
    if not n or not judge_all.count:
        return None, None
    import numpy as np

    diff = np.asarray(human, dtype=float) - np.asarray(judge, dtype=float)
    mean = judge_all.mean + float(diff.mean())
    if n < 2 or judge_all.count < 2:
        return _finite(mean), None
    half = 1.96 * math.sqrt(judge_all.variance / judge_all.count + float(diff.var(ddof=1)) / n)
    low, high = _finite(mean - half), _finite(mean + half)
    return _finite(mean), (None if low is None or high is None else (low, high))


def annotators_kappa(verdicts: Mapping[_Who, Mapping[str, str]], min_shared: int = MIN_SHARED) -> float | None:
    """The mean Cohen's kappa over every pair of annotators (annotator -> item -> verdict)
    who labelled at least ``min_shared`` of the same items (None when no pair did, or no
    qualifying pair's kappa is defined).

    Example:
        >>> ana = {f"i{n}": "pass" if n % 2 else "fail" for n in range(10)}
        >>> bob = dict(ana, i0="pass")
        >>> round(annotators_kappa({"ana": ana, "bob": bob}), 4)
        0.8
        >>> annotators_kappa({"ana": ana, "bob": dict(list(bob.items())[:9])}) is None
        True
    """
    kappas = []
    for a, b in combinations(sorted(verdicts, key=repr), 2):
        shared = sorted(verdicts[a].keys() & verdicts[b].keys())
        if len(shared) >= min_shared:
            value = kappa([verdicts[a][i] for i in shared], [verdicts[b][i] for i in shared])
            if value is not None:
                kappas.append(value)
    return sum(kappas) / len(kappas) if kappas else None
