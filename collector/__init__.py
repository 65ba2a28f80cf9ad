"""tracescore's daemon, one folder per stage of its data path.

receive (OTLP listeners) -> assemble (per-trace buffering, run decisions) -> store
(trace buffer, job queue, dead letters, outbox; SQLite or Redis) -> work (scorers) ->
export (evaluation spans, forwarded spans). `service` wires them; `commands` is the CLI;
`common` is what they all share (the data that flows between the stages, its JSON, ids,
errors, metrics and small asyncio helpers).
"""
