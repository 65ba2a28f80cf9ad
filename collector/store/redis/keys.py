"""Every Redis key and name the Redis backend uses, built from one deployment prefix.

All keys of one deployment start with ``queue.key_prefix`` (default ``tracescore:``) made a
Redis Cluster hash tag: ``tracescore:`` becomes ``{tracescore}:`` (a prefix that already
holds a ``{...}`` tag is kept as it is). So several deployments (or tests) share one Redis
without touching each other, ``RedisKeys.pattern`` finds everything a deployment wrote, and
on a Cluster every key of a deployment hashes to one slot: each Lua script and MULTI (some
compute per-trace or per-session key names from the prefix) touches one slot only, as
Cluster requires (`tests/collector/store/redis/test_key_slots.py` checks every call).
The cost: one deployment's keys live on one Cluster primary; deployments with different
prefixes land on different slots, hence spread over the primaries (the README's Cluster
section). Keys written under the untagged names by earlier versions are renamed once, at
start, by `collector.store.redis.migrate`.

Layout (``P`` is the prefix)::

    P jobs              stream     queued and leased score jobs (consumer group ``workers``)
    P delayed           zset       job keys handed back with a delay, scored by due time
    P delayed:data      hash       job key -> "attempts|job JSON" of delayed jobs
                                   (a parked job: "attempts,parked_since|job JSON")
    P parked            hash       job key -> park reason, from its Park until settled otherwise
    P dead              stream     dead letters: key, job, error JSON, attempts, failed_at
    P idem:<job key>    string     "queued" | "done" | "dead", with a TTL (SET NX on enqueue)
    P outbox            zset       outbox item id -> time it may be (re)exported
    P outbox:data       hash       outbox item id -> ScoreRecord JSON
    P outbox:attempts   hash       outbox item id -> failed export attempts
    P outbox:seq        string     the last outbox item id (INCR)
    P traces:open       zset       undecided trace ids (hex), scored by first arrival
    P traces:decided    zset       decided trace ids kept as context, by first arrival
    P decide            zset       trace ids waiting for a decision, scored by decision time
    P meta:<trace id>   hash       first_seen, spans, candidate, root, claim
    P chunks:<trace id> list       the trace's chunks: one signal byte + serialised protobuf
    P sink:<name>       zset       a native sink's outbox: item id (the OTLP outbox's) -> due time
    P sink:<name>:data  hash       item id -> ScoreRecord JSON
    P sink:<name>:attempts hash    item id -> failed attempts
    P sink:<name>:waiting  hash    item id -> when the backend first did not know the span
    P forward           stream     received requests to forward: s (signal), b (body); id <seq>-0
    P forward:seq       string     the last forward position (INCR)
    P forward:sent      string     the last position the export endpoint accepted
    P forward:bytes     string     bytes of the requests in the stream
    P forward:leader    string     the receiver that forwards (a lease, PX)
    P partitions        string     the deployment's partition count when above 1
                                   (`collector.store.redis.partitions`; absent: 1)
    P sessions:due      zset       open sessions (scope) by wake time: due time, or claim end
    P sessions:unforced zset       open sessions not forced out yet, by opening time (max_open)
    P sessions:scored   zset       scored sessions by the time they are forgotten
    P sessions:counts   hash       scored_total, reopened_total, forced_total, capped_total, short_total
    P session:<scope>   hash       session_id, service, open, opened_at, last_noted, due_at,
                                   reason, claim_until, scored_rev
    P turns:<scope>     hash       "trace_id/span_id" -> the turn's RunRecord JSON
    P judge:spend:<window>     hash  scope -> settled USD of the budget window (TTL: 40 days)
    P judge:res:<window>       zset  live reservations of the window by expiry (caller's clock)
    P judge:resdata:<window>   hash  reservation -> JSON [amount, scope...]
    P judge:rate:<model>       hash  rpm, tpm (GCRA arrival times), cool (server clock; TTL)
    P judge:breakers           hash  breaker key -> JSON {model, reason, since, interval_s}
    P judge:probes             hash  breaker key -> next probe (epoch s)
    P judge:limits             hash  scope -> "usd,configured": a limit set by `judges budget`
    P totals            hash       the deployment's totals: field -> amount (`collector.store.totals`)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from collector.store.redis.judge_keys import JudgeKeys
from collector.store.redis.totals import TotalsKeys

GROUP = "workers"
"""The consumer group every worker reads the job stream with."""

IDEM_QUEUED, IDEM_DONE, IDEM_DEAD = "queued", "done", "dead"
"""Values of an idempotency key: the job waits or runs, it was completed, it was dead-lettered."""

SIGNAL_SPANS, SIGNAL_LOGS = b"s", b"l"
"""The first byte of a stored trace chunk: a ``TracesData`` or a ``LogsData``."""


_TAG = re.compile(r"\{[^}]+\}")


def hash_tagged(prefix: str) -> str:
    """``prefix`` with its name in a Cluster hash tag (kept when it holds one already).

    Example:
        >>> hash_tagged("tracescore:"), hash_tagged("{ts}:prod:"), hash_tagged("team-a")
        ('{tracescore}:', '{ts}:prod:', '{team-a}')
    """
    if _TAG.search(prefix):
        return prefix
    name = prefix.rstrip(":") or prefix
    return "{" + name + "}" + prefix[len(name):]


@dataclass(frozen=True)
class RedisKeys(JudgeKeys, TotalsKeys):
    """The keys of one deployment: ``configured`` is ``queue.key_prefix``, ``prefix`` the
    hash-tagged prefix every key starts with (`hash_tagged`).

    Example:
        >>> keys = RedisKeys("ts:")
        >>> keys.jobs, keys.idem("t/s/q/1"), keys.chunks("ab")
        ('{ts}:jobs', '{ts}:idem:t/s/q/1', '{ts}:chunks:ab')
        >>> keys.pattern
        '{ts}:*'
    """

    configured: str = "tracescore:"
    prefix: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefix", hash_tagged(self.configured))

    @property
    def hash_tag(self) -> str:
        """The Cluster hash tag every key of the deployment carries (braces included).

        Example:
            >>> RedisKeys("ts:").hash_tag, RedisKeys("{team}:prod:").hash_tag
            ('{ts}', '{team}')
        """
        found = _TAG.search(self.prefix)
        assert found is not None  # `hash_tagged` always leaves one
        return found.group()

    @property
    def jobs(self) -> str:
        """The job stream.

        Example:
            >>> RedisKeys("p:").jobs
            '{p}:jobs'
        """
        return self.prefix + "jobs"

    @property
    def delayed(self) -> str:
        """Jobs handed back with a delay (zset of job keys by due time).

        Example:
            >>> RedisKeys("p:").delayed
            '{p}:delayed'
        """
        return self.prefix + "delayed"

    @property
    def delayed_data(self) -> str:
        """The payloads of delayed jobs (hash).

        Example:
            >>> RedisKeys("p:").delayed_data
            '{p}:delayed:data'
        """
        return self.prefix + "delayed:data"

    @property
    def dead(self) -> str:
        """The dead-letter stream.

        Example:
            >>> RedisKeys("p:").dead
            '{p}:dead'
        """
        return self.prefix + "dead"

    @property
    def idem_prefix(self) -> str:
        """The prefix of idempotency keys (scripts append the job key).

        Example:
            >>> RedisKeys("p:").idem_prefix
            '{p}:idem:'
        """
        return self.prefix + "idem:"

    def idem(self, job_key: str) -> str:
        """The idempotency key of a job.

        Example:
            >>> RedisKeys("p:").idem("k")
            '{p}:idem:k'
        """
        return self.idem_prefix + job_key

    def replies(self, job_key: str) -> str:
        """The hash of a job's judge replies (request key -> reply JSON), until it settles.

        Example:
            >>> RedisKeys("p:").replies("k")
            '{p}:replies:k'
        """
        return self.prefix + "replies:" + job_key

    @property
    def outbox(self) -> str:
        """Outbox item ids by the time they may be exported (zset).

        Example:
            >>> RedisKeys("p:").outbox
            '{p}:outbox'
        """
        return self.prefix + "outbox"

    @property
    def outbox_data(self) -> str:
        """Outbox records by item id (hash).

        Example:
            >>> RedisKeys("p:").outbox_data
            '{p}:outbox:data'
        """
        return self.prefix + "outbox:data"

    @property
    def outbox_attempts(self) -> str:
        """Failed export attempts by item id (hash).

        Example:
            >>> RedisKeys("p:").outbox_attempts
            '{p}:outbox:attempts'
        """
        return self.prefix + "outbox:attempts"

    @property
    def forward(self) -> str:
        """The forward log stream.

        Example:
            >>> keys = RedisKeys("p:")
            >>> keys.forward, keys.forward_seq, keys.forward_sent, keys.forward_bytes, keys.forward_leader
            ('{p}:forward', '{p}:forward:seq', '{p}:forward:sent', '{p}:forward:bytes', '{p}:forward:leader')
        """
        return self.prefix + "forward"

    @property
    def forward_seq(self) -> str:
        """The forward position counter (see `forward`)."""
        return self.prefix + "forward:seq"

    @property
    def forward_sent(self) -> str:
        """The last forward position the export endpoint accepted (see `forward`)."""
        return self.prefix + "forward:sent"

    @property
    def forward_bytes(self) -> str:
        """Bytes waiting in the forward stream (see `forward`)."""
        return self.prefix + "forward:bytes"

    @property
    def forward_leader(self) -> str:
        """The forwarding lease (see `forward`)."""
        return self.prefix + "forward:leader"

    @property
    def outbox_seq(self) -> str:
        """The outbox item id counter.

        Example:
            >>> RedisKeys("p:").outbox_seq
            '{p}:outbox:seq'
        """
        return self.prefix + "outbox:seq"

    @property
    def traces_open(self) -> str:
        """Undecided traces by first arrival (zset).

        Example:
            >>> RedisKeys("p:").traces_open
            '{p}:traces:open'
        """
        return self.prefix + "traces:open"

    @property
    def traces_decided(self) -> str:
        """Decided traces kept as context, by first arrival (zset).

        Example:
            >>> RedisKeys("p:").traces_decided
            '{p}:traces:decided'
        """
        return self.prefix + "traces:decided"

    @property
    def decide(self) -> str:
        """Traces by decision time: the shared decision timer (zset).

        Example:
            >>> RedisKeys("p:").decide
            '{p}:decide'
        """
        return self.prefix + "decide"

    def meta(self, trace_hex: str) -> str:
        """A trace's bookkeeping hash.

        Example:
            >>> RedisKeys("p:").meta("ab")
            '{p}:meta:ab'
        """
        return self.prefix + "meta:" + trace_hex

    def chunks(self, trace_hex: str) -> str:
        """A trace's chunk list.

        Example:
            >>> RedisKeys("p:").chunks("ab")
            '{p}:chunks:ab'
        """
        return self.prefix + "chunks:" + trace_hex

    def sink(self, name: str) -> str:
        """A native sink's outbox: item ids by the time they may be sent (zset).

        Example:
            >>> RedisKeys("p:").sink("phoenix")
            '{p}:sink:phoenix'
        """
        return self.prefix + "sink:" + name

    def sink_data(self, name: str) -> str:
        """A sink's records by item id (hash).

        Example:
            >>> RedisKeys("p:").sink_data("mlflow")
            '{p}:sink:mlflow:data'
        """
        return self.sink(name) + ":data"

    def sink_attempts(self, name: str) -> str:
        """A sink's failed attempts by item id (hash).

        Example:
            >>> RedisKeys("p:").sink_attempts("mlflow")
            '{p}:sink:mlflow:attempts'
        """
        return self.sink(name) + ":attempts"

    def sink_waiting(self, name: str) -> str:
        """When the sink's backend first did not know an item's span, by item id (hash).

        Example:
            >>> RedisKeys("p:").sink_waiting("mlflow")
            '{p}:sink:mlflow:waiting'
        """
        return self.sink(name) + ":waiting"

    @property
    def sessions_due(self) -> str:
        """Open sessions by wake time (zset); the other session keys are listed in the module.

        Example:
            >>> keys = RedisKeys("p:")
            >>> keys.sessions_due, keys.sessions_unforced, keys.sessions_scored, keys.sessions_counts
            ('{p}:sessions:due', '{p}:sessions:unforced', '{p}:sessions:scored', '{p}:sessions:counts')
            >>> keys.session_prefix, keys.turns_prefix
            ('{p}:session:', '{p}:turns:')
        """
        return self.prefix + "sessions:due"

    @property
    def sessions_unforced(self) -> str:
        """Open sessions not forced out, by opening time (zset)."""
        return self.prefix + "sessions:unforced"

    @property
    def sessions_scored(self) -> str:
        """Scored sessions by the time they are forgotten (zset)."""
        return self.prefix + "sessions:scored"

    @property
    def sessions_counts(self) -> str:
        """The sessions' monotonic totals (hash)."""
        return self.prefix + "sessions:counts"

    @property
    def session_prefix(self) -> str:
        """The prefix of a session's hash (scripts append its scope)."""
        return self.prefix + "session:"

    @property
    def turns_prefix(self) -> str:
        """The prefix of a session's turns hash (scripts append its scope)."""
        return self.prefix + "turns:"

    @property
    def partitions(self) -> str:
        """The deployment's partition count (string; absent: one partition, these keys)."""
        return self.prefix + "partitions"

    @property
    def pattern(self) -> str:
        """A SCAN/KEYS pattern matching every key of the deployment.

        Example:
            >>> RedisKeys("p:").pattern
            '{p}:*'
        """
        return self.prefix + "*"
