"""tracescore adapters: agent runs from OpenTelemetry traces of every major convention."""
