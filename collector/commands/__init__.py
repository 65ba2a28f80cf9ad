"""Subcommands of the `tracescore` CLI, one implementation module each.

`table` lists the commands: name, help line, the ``add_arguments(parser)`` of each (in
`arguments`, light: building the parser imports no implementation) and the module whose
``run(args) -> int`` (the process exit code) carries it out, imported only when it runs.
"""
