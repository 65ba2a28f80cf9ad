"""What ``tracescore status`` shows: snapshots of a daemon's own measurements.

`snapshot` turns one replica's Prometheus instruments and store counts into a JSON
snapshot (served on ``/status``); `group` merges the snapshots of a scale-out group into
one view; `view` draws that view in the terminal. `agreement` measures how the judges agree
with people's labels (SPEC §11): `verdicts` reads labels and scores as verdicts,
`agreement_labels` resolves the labels per item, `agreement_stats` holds the statistics.
Only reads: metrics, config and types below it.
"""
