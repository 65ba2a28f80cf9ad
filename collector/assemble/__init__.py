"""Assemble: received requests, in; score jobs on the store's queue, out.

`TraceAssembler` is the consumer the receivers call: it writes each request to the
store's trace buffer (durably, before the receiver answers) and, ``decision_wait`` after
a trace's run span arrived, loads the trace and lets `RunDecider` turn it into
`collector.common.types.ScoreJob`s: the adapters find the agent runs, the `ScorerSelection`
(the daemon's scorer registry) says which scorers take each run. Jobs go to the store's
`JobQueue`, where the workers take them.
"""

from collector.assemble.assembler import TraceAssembler
from collector.assemble.decide import RunDecider, ScorerSelection

__all__ = ["RunDecider", "ScorerSelection", "TraceAssembler"]
