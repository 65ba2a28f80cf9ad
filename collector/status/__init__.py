"""What ``tracescore status`` shows: snapshots of a daemon's own measurements.

`snapshot` turns one replica's Prometheus instruments and store counts into a JSON
snapshot (served on ``/status``); `group` merges the snapshots of a scale-out group into
one view; `view` draws that view in the terminal. Only reads: metrics and types below it.
"""
