"""tracescore's daemon: OTLP receivers, trace assembly, job queue, workers, score export, CLI."""
