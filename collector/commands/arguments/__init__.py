"""What each subcommand accepts: one module per command, each with ``add_arguments(parser)``.

These modules import argparse (and the global flags) and nothing else of weight, so the
command line is built, ``--help`` included, without importing any command's implementation;
`collector.commands.table` names the implementation that runs.
"""
