"""Sending durably: the one loop and the one reading of a backend's answer that forwarding,
the OTLP score export and the native score sinks share.

* `answers`: a backend's answer (HTTP or gRPC status, or none) -> send again (an outage),
  hold for a configuration fix, wait for what it refers to, or refuse for good, with the
  backend's own message.
* `loop`: `loop.SendLoop`, parameterised by where the items wait (`loop.Backlog`) and how
  they are sent (`loop.Course`).
* `backlogs`: the store's forward log, outbox and sink outboxes as backlogs.
* `otlp`: the OTLP/gRPC and OTLP/HTTP client of forwarding and the score export.
* `watch`: the log lines of a stretch of failures and the state ``tracescore status`` shows.

What is kept stays in the store (forward log, outbox, sink outbox) until the backend took it:
a restart finds it there.
"""
