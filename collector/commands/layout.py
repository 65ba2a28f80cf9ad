"""How the commands print their tables so that no number or name is ever cut.

rich fits a table to the console's width by wrapping and, in columns that may not wrap,
cutting cells with an ellipsis (``USD 0.0002…``). `print_table` never lets it cut:

- off a terminal (a pipe, a file, a CI log) the table is drawn as wide as its cells need,
  whatever ``COLUMNS`` says: a script or a log keeps every digit;
- on a terminal the table is drawn as it is when it fits; when it does not, each row is
  printed as a record instead (`stacked_lines`): its first cell as a heading line, then
  ``header: value`` pairs packed into the terminal's width, a value too long for a line
  wrapped whole onto the next ones. ``fold=True`` keeps a table of long texts (messages)
  a table, its cells folded into their columns, as rich does with ``overflow="fold"``.
"""

from __future__ import annotations

import textwrap

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table

__all__ = ["natural_width", "print_table", "stacked_lines"]

_UNBOUNDED = 1 << 20
_SEPARATOR = "; "
_INDENT = "  "


def natural_width(table: Table, console: Console) -> int:
    """The columns ``table`` takes when no cell is wrapped or cut.

    Example:
        >>> import io
        >>> table = Table("scorer", "USD")
        >>> table.add_row("answer-relevancy", "0.000213")
        >>> natural_width(table, Console(file=io.StringIO(), width=20))  # cells, their padding, 3 borders
        31
    """
    return console.measure(table, options=console.options.update_width(_UNBOUNDED)).maximum


def _text(cell: object) -> str:
    """A cell as one line of plain text (its lines joined by spaces)."""
    return " ".join(str(cell).split())


def stacked_lines(table: Table, width: int) -> list[str]:
    """``table`` as records that fit ``width`` columns: per row, its first cell on a line, then
    ``header: value`` pairs of its other non-empty cells packed two spaces in; a pair longer than
    a line is wrapped onto the next lines, never cut.

    Example:
        >>> table = Table("scorer", "runs", "judge calls", "USD", "worst-case USD", title="judge cost estimate")
        >>> table.add_row("answer-relevancy", "10", "30", "0.001043", "0.019073")
        >>> for line in stacked_lines(table, 44):
        ...     print(line)
        judge cost estimate
        scorer: answer-relevancy
          runs: 10; judge calls: 30; USD: 0.001043
          worst-case USD: 0.019073
    """
    lines = [_text(table.title)] if table.title else []
    columns = [(_text(column.header), [_text(cell) for cell in column.cells]) for column in table.columns]
    if not columns:
        return lines
    room = max(width - len(_INDENT), 20)
    for row in range(table.row_count):
        heading, values = columns[0]
        lines.append(f"{heading}: {values[row]}" if heading else values[row])
        line = ""
        for header, cells in columns[1:]:
            if not cells[row]:
                continue
            pair = f"{header}: {cells[row]}" if header else cells[row]
            if line and cell_len(line) + len(_SEPARATOR) + cell_len(pair) <= room:
                line += _SEPARATOR + pair
                continue
            if line:
                lines.append(_INDENT + line)
            line = pair
            if cell_len(pair) > room:  # a long text: wrapped whole, on lines of its own
                wrapped = textwrap.wrap(pair, room, subsequent_indent=_INDENT, break_on_hyphens=False)
                lines.extend(_INDENT + part for part in wrapped)
                line = ""
        if line:
            lines.append(_INDENT + line)
    return lines


def print_table(console: Console, table: Table, *, fold: bool = False) -> None:
    """Print ``table`` on ``console`` with nothing cut (see the module docstring): as wide as it
    needs off a terminal; on a terminal as a table when it fits, else as `stacked_lines` (or,
    with ``fold``, as a table whose cells fold into the terminal's width).

    Example:
        >>> import io
        >>> table = Table("scorer", "USD")
        >>> table.add_row("answer-relevancy", "0.000213")
        >>> piped = Console(file=io.StringIO(), width=12)
        >>> print_table(piped, table)
        >>> "0.000213" in piped.file.getvalue() and "answer-relevancy" in piped.file.getvalue()
        True
    """
    needed = natural_width(table, console)
    if not console.is_terminal:
        if needed > console.width:
            console = Console(file=console.file, width=needed, no_color=console.no_color,
                              color_system=None, highlight=False)
        console.print(table)
    elif needed <= console.width or fold:
        console.print(table)
    else:
        for line in stacked_lines(table, console.width):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
