"""Native score sinks (SPEC §5): each score as the backend's own score object, beside the OTLP
evaluation span. Phoenix span annotations, MLflow assessments, Langfuse scores.

`base` holds what they share (reading an answer, ids from the score key, HTTP), one module per
backend maps a `collector.common.types.ScoreRecord` to its API, and `sender.SinkSender` drains
the sink's outbox in the store (durable, retried with backoff, idempotent). `make_senders`
builds a sender per configured sink.
"""

from __future__ import annotations

from collections.abc import Callable

from collector.common.metrics import Metrics
from collector.config import SinksConfig
from collector.export.sinks.base import SinkClient
from collector.export.sinks.langfuse import LangfuseSink
from collector.export.sinks.mlflow import MlflowSink
from collector.export.sinks.phoenix import PhoenixSink
from collector.export.sinks.sender import SinkSender
from collector.store.interface import ForwardLog, SinkOutbox

__all__ = ["LangfuseSink", "MlflowSink", "PhoenixSink", "SinkClient", "SinkSender", "make_senders"]


def make_senders(cfg: SinksConfig, outbox_of: Callable[[str], SinkOutbox], metrics: Metrics,
                 forwarded: ForwardLog | None = None) -> list[SinkSender]:
    """A sender per sink that is on, reading its outbox from ``outbox_of(name)`` (``forwarded``:
    the forward log, when received spans are forwarded: a score waits for its run's spans).

    Raises:
        collector.common.errors.ConfigError: a key's ``env:NAME`` variable is not set.

    Example:
        >>> make_senders(SinksConfig(), lambda name: None, Metrics())  # type: ignore[arg-type,return-value]
        []
    """
    clients: dict[str, SinkClient] = {}
    if cfg.phoenix.enabled:
        clients["phoenix"] = PhoenixSink(cfg.phoenix)
    if cfg.mlflow.enabled:
        clients["mlflow"] = MlflowSink(cfg.mlflow)
    if cfg.langfuse.enabled:
        clients["langfuse"] = LangfuseSink(cfg.langfuse)
    return [SinkSender(client, outbox_of(name), getattr(cfg, name), metrics, forwarded=forwarded)
            for name, client in clients.items()]
