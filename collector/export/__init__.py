"""Export: score records from the store's outbox, and received spans, out to the backend.

`ScoreExporter` turns each `collector.common.types.ScoreRecord` into an ``evaluation <scorer>``
child span with a ``gen_ai.evaluation.result`` event and sends it over OTLP, releasing a
record from the outbox only once the backend accepted it (retrying with backoff
otherwise). `collector.export.evaluation` builds that span. `ScoreSignals` adds the optional
log record and metric per score. `collector.export.sinks` sends each score to Phoenix, MLflow
or Langfuse as their own score object, from its own outbox per sink. `Forwarder` passes
received spans and logs through to the export endpoint. All of them send durably through one
loop and one reading of a backend's answer (`collector.export.send`).
"""

from typing import TYPE_CHECKING

from collector.common.lazy import lazy_exports

if TYPE_CHECKING:
    from collector.export.forward import Forwarder
    from collector.export.scores import ScoreExporter
    from collector.export.signals import ScoreSignals

__all__ = ["Forwarder", "ScoreExporter", "ScoreSignals"]
# Imported on first use: ``tracescore check`` reads backends' answers (`collector.export.send.answers`)
# without the OTLP clients' aiohttp and gRPC.
__getattr__ = lazy_exports(__name__, {"Forwarder": "collector.export.forward", "ScoreExporter": "collector.export.scores",
                                      "ScoreSignals": "collector.export.signals"})
