"""``tracescore align``: rewrite a scorer's judge instructions from people's labels, and prove
each rewrite on items it was not written from (SPEC §11, "Align").

`command` runs it (``run(args)``); `items` reads the labelled runs (files or a backend) and
splits them by trace id into train and holdout; `judging` runs a judge over items under the
§8 spend governors and measures its agreement; `propose` asks the proposer model for
rewritten instructions and tells usable ones from the rest; `report` prints the table or
the JSON object and writes ``DIR/<scorer id>.toml`` atomically.
"""

from collector.commands.align.command import run

__all__ = ["run"]
