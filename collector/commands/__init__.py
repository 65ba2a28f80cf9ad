"""Subcommands of the `tracescore` CLI, one module each.

Every module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int`` (the process exit code).
"""
