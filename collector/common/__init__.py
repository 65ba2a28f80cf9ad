"""What every part of the daemon has in common: the lowest layer, imported by all, importing
nothing else of the collector.

Named for what it holds: not one stage's code but what the stages, the store, the service
and the commands share. The vocabulary they speak: the records that flow between the stages
(`types`; conversations in `session_types`, judge governance in `judge_types`), their JSON
(`record_json`), the ids derived from ids (`ids`), the in-process hand-over beside a record
(`handoff`) and the errors with their OTLP codes (`errors`). And the helpers every layer
uses: the Prometheus instruments (`metrics`) and the version they report (`version`),
asyncio waits that keep a cancellation (`aio`), stop signals that reach the loop (`signals`)
and package exports imported on first use (`lazy`).

Its modules import only each other (and the libraries), so importing one never pulls in a
stage; this package's ``__init__`` imports nothing, so ``tracescore --version`` stays light.
"""
