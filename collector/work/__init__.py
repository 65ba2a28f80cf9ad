"""Work: score jobs from the store's queue, in; settled jobs and score records, out.

`ScorerRegistry` holds the configured scorers (imported from their refs, with each
one's filter, sampling and labels); `Worker` takes leased jobs, runs the job's scorer
on its run with bounded concurrency, and settles each job with the store: `Done` with a
`collector.common.types.ScoreRecord` for the outbox, `Retry` after a transient failure, or
`Dead` (a dead letter, and a failure record so the failure is exported too).

The names it exports are imported on first use (`collector.common.lazy`): importing one of its
modules alone does not import the others.
"""

from typing import TYPE_CHECKING

from collector.common.lazy import lazy_exports

if TYPE_CHECKING:
    from collector.work.registry import RegisteredScorer, ScorerRegistry
    from collector.work.scorer_ref import load_ref
    from collector.work.worker import Worker

__all__ = ["RegisteredScorer", "ScorerRegistry", "Worker", "load_ref"]
__getattr__ = lazy_exports(__name__, {
    "RegisteredScorer": "collector.work.registry",
    "ScorerRegistry": "collector.work.registry",
    "load_ref": "collector.work.scorer_ref",
    "Worker": "collector.work.worker",
})
