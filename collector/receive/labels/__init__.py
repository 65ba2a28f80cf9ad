"""Labels: people's verdicts read from the backends where tracescore writes its scores, and from
JSONL files (SPEC §11), as `collector.common.labels.Label`.

Receiving, once more: a `LabelReader` per source named in ``[labels] from`` (`label_readers`)
reads the human feedback of its sink's backend (`phoenix`: span and session annotations of kind
HUMAN; `mlflow`: HUMAN feedback assessments; `langfuse`: ANNOTATION scores), never tracescore's
own scores (Phoenix ``LLM``/``CODE`` annotations with ``tracescore:`` identifiers, MLflow
``LLM_JUDGE``/``CODE`` assessments, Langfuse ``API`` scores). No backend lists labels by the time
they changed, so each pull sweeps a window and hands on what changed since the stored cursor
(`sweep`; each backend's module says what it reads, what a pull costs and what it cannot see).
A row not shaped like the API's is skipped and counted (``reader.skipped``); a backend that is
down, times out or refuses raises `collector.common.errors.PullError` (status and message,
credentials masked): the caller logs it and pulls again at the next poll from the cursor it has.
`read_label_file` reads ``labels import`` files, all or nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol

from collector.common.labels import Label
from collector.config import Config
from collector.receive.labels.file import LabelFileError, read_label_file
from collector.receive.labels.langfuse import LangfuseLabels
from collector.receive.labels.mlflow import MlflowLabels
from collector.receive.labels.phoenix import PhoenixLabels
from collector.receive.pull import Retry

__all__ = ["LabelFileError", "LabelReader", "LangfuseLabels", "MlflowLabels", "PhoenixLabels", "label_readers",
           "read_label_file"]


class LabelReader(Protocol):
    """One backend's people's labels."""

    source: str  # "phoenix" | "mlflow" | "langfuse"
    skipped: int  # rows not shaped like the backend's API, skipped (over the reader's life)

    def pages(self, cursor: str | None, since_s: float, names: Sequence[str]) -> AsyncIterator[tuple[list[Label], str]]:
        """Labels in pages of bounded size, each with the cursor to store once that page is kept
        (a later pull resumes from it: incremental). ``cursor`` None = first pull: the labels of
        the last ``since_s`` seconds. ``names``: the scorer names tracescore knows (a reader may
        read all names; labels of unknown names are kept by the caller and counted unmatched).

        Raises:
            collector.common.errors.PullError: the backend is down, timed out or refused (the
                pages already yielded stay kept; the cursor of the last one is where to resume).
        """
        ...


def label_readers(config: Config, retry: Retry | None = None) -> list[LabelReader]:
    """One reader per source in ``[labels] from``, in that order, with its sink's URL and credentials
    (``[labels]`` is checked against the sinks when the configuration loads).

    Raises:
        collector.common.errors.ConfigError: a sink's ``env:NAME`` credential names an unset variable.

    Example:
        >>> from collector.config import config_from_dict
        >>> cfg = config_from_dict({"sinks": {"mlflow": {"tracking_uri": "http://127.0.0.1:5000"},
        ...                                   "phoenix": {"endpoint": "http://127.0.0.1:6006"}},
        ...                         "labels": {"from": ["mlflow", "phoenix"]}})
        >>> [(r.source, r.base_url) for r in label_readers(cfg)]
        [('mlflow', 'http://127.0.0.1:5000'), ('phoenix', 'http://127.0.0.1:6006')]
    """
    kinds = {"phoenix": PhoenixLabels, "mlflow": MlflowLabels, "langfuse": LangfuseLabels}
    readers = [kinds[name](config.sinks, retry) for name in config.labels.sources]
    for reader in readers:
        reader.client()  # reads the credentials now: an unset env:NAME fails at start, not at the first pull
    return readers
