"""How commands report a configuration error: one line, plus its traceback at ``-v``.

A scorer module that fails to import or a factory that raises is a `ConfigError` chained
to the original exception; its message names the file and line, and with ``-v`` (INFO
logging) the whole traceback is logged.
"""

from __future__ import annotations

import logging
import sys

from collector.common.errors import ConfigError

logger = logging.getLogger(__name__)


def report_config_error(err: ConfigError) -> None:
    """Print ``tracescore: <err>`` on stderr; at ``-v``, log the cause's traceback too.

    Example:
        >>> import contextlib, io
        >>> with contextlib.redirect_stderr(io.StringIO()) as out:
        ...     report_config_error(ConfigError("queue.url: bad"))
        >>> out.getvalue()
        'tracescore: queue.url: bad\\n'
    """
    print(f"tracescore: {err}", file=sys.stderr)
    cause = err.__cause__
    while isinstance(cause, ConfigError) and cause.__cause__ is not None:  # re-raised naming the key
        cause = cause.__cause__
    if cause is not None and logger.isEnabledFor(logging.INFO):
        logger.info("the cause of that error", exc_info=cause)
