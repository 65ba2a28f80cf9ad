"""``tracescore serve``: run the daemon until SIGTERM (which drains and flushes)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import sys
from collections.abc import Callable

from collector.commands.preflight import preflight_errors
from collector.commands.report import report_config_error
from collector.common.errors import ConfigError
from collector.config import Config, ScorerConfig, load_config
from collector.work.registry import ScorerRegistry

logger = logging.getLogger(__name__)


def build(args: argparse.Namespace) -> tuple[Config, ScorerRegistry]:
    """Load the configuration, add ``--scorer`` refs, import every scorer.

    Raises:
        ConfigError: on any configuration or import problem.

    Example:
        >>> cfg, reg = build(argparse.Namespace(config=None, scorer=[]))
        >>> reg.entries
        []
    """
    config = load_config(args.config)
    if args.scorer:
        extra = [ScorerConfig(ref=ref) for ref in args.scorer]
        config = config.model_copy(update={"scorers": [*config.scorers, *extra]})
    return config, ScorerRegistry.load(config.scorers)


def started(line: str) -> None:
    """The daemon is serving: say so (``line``: what it serves) on stderr, and keep what start-up
    made out of the garbage collector's walks (`gc.freeze`): modules, pydantic schemas, scorers
    and the judge's price map live as long as the process, and every full collection that the
    runs' garbage sets off walked all of them (measured: about a tenth of the daemon's CPU).
    """
    print(line, file=sys.stderr, flush=True)
    gc.freeze()


def daemon_loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """The daemon's event loop: uvloop's (libuv's). Its callbacks, timers and socket reads cost
    less than the standard loop's (`bench/README.md`: the worker's CPU per run fell by 6%
    against the standard loop). asyncio, aiohttp, grpc.aio and the Redis client run on it
    unchanged.

    Example:
        >>> loop = daemon_loop_factory()()
        >>> type(loop).__module__, loop.run_until_complete(asyncio.sleep(0, "ran"))
        ('uvloop', 'ran')
        >>> loop.close()
    """
    import uvloop

    return uvloop.new_event_loop


def run(args: argparse.Namespace) -> int:
    """Run the daemon; returns the exit code: 0 after SIGTERM/SIGINT, 2 for a configuration
    error (naming the key; `collector.commands.preflight`'s findings included), 1 when it
    cannot start (a listener's port is taken: named).
    """
    from collector.receive.memory import tune_malloc
    from collector.service import Service

    tune_malloc()  # before any thread starts: large bodies' memory is given back
    try:
        config, registry = build(args)
        problems = preflight_errors(config, registry.entries)  # what would fail every job or export
        if problems:
            raise ConfigError(f"invalid configuration: {problems[0]}")
        service = Service(config, registry, role=getattr(args, "role", "all"))
    except ConfigError as err:
        report_config_error(err)
        return 2
    if not registry.entries:
        logger.warning("no scorers registered: spans are received and forwarded, nothing is scored")
    try:
        with asyncio.Runner(loop_factory=daemon_loop_factory()) as runner:
            runner.run(service.run_until_signal(started))
    except ConfigError as err:  # found at start: Redis refused the URL, or a bound port 0 is a destination
        print(f"tracescore: {err}", file=sys.stderr)
        return 2
    except (OSError, RuntimeError) as err:  # a port in use: the receivers' OSError names HOST:PORT
        print(f"tracescore: cannot start: {err}", file=sys.stderr)
        return 1
    return 0
