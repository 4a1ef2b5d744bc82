"""The tables of pycgpu's human-readable output (``top``, ``stat``,
``devices``, ``k8s inventory``, and the findings of ``check`` and ``image
check``), rendered by rich: aligned columns without borders, text on the
left, numbers on the right, two spaces between columns.

On a terminal a table goes through rich's console (bold header); anywhere
else it is plain text, without colour or escape sequences, never wrapped or
cut, each line without trailing blanks: what scripts and ``grep`` see stays
stable. ``pycgpu top``'s live view fits its table to the terminal
(:mod:`pycgpu.monitoring.frames`). rich is imported by the functions that use
it, so that ``import pycgpu.cli`` stays small.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult
    from rich.table import Table

# plain text is never wrapped: wider than any table
_PLAIN_WIDTH = 1 << 16


def table(header: Sequence[str], rows: Iterable[Sequence[str]], *, left: Collection[str] = (),
          cut: Collection[str] = (), header_style: str = "bold") -> Table:
    """A table with the columns @header and the cells @rows (text, shown as
    is: no rich markup). Columns named in @left are left-aligned, the others
    (numbers) right-aligned. Drawn narrower than its natural width (a live
    view on a small terminal), the columns named in @cut give way first,
    their cells cut short with an ellipsis; every row stays one line."""
    from rich.table import Table
    from rich.text import Text

    t = Table(box=None, pad_edge=False, show_edge=False, header_style=header_style)
    for name in header:
        # a column that may wrap is one rich narrows first; its cells do not wrap
        t.add_column(name, justify="left" if name in left else "right",
                     no_wrap=name not in cut, overflow="ellipsis")
    for row in rows:
        t.add_row(*(Text(cell, no_wrap=True, overflow="ellipsis") for cell in row))
    return t


def listing(rows: Iterable[Sequence[str]], widths: Sequence[int]) -> Table:
    """Rows without a header, each column at least as wide as @widths says
    and followed by one space, the last column free: the findings of
    ``check`` and ``image check`` (a fix on a row of its own, under the
    message: its first cells empty)."""
    from rich.table import Table
    from rich.text import Text

    t = Table(box=None, show_header=False, pad_edge=False, show_edge=False,
              padding=(0, 1, 0, 0))
    for width in widths:
        t.add_column(min_width=width, no_wrap=True)
    t.add_column(no_wrap=True)
    for row in rows:
        t.add_row(*(Text(cell) for cell in row))
    return t


def plain(renderable: Any) -> str:
    """@renderable as plain text: no colour, no escape sequences, nothing
    wrapped or cut, no trailing blanks."""
    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False, no_color=True, color_system=None,
                      width=_PLAIN_WIDTH, highlight=False, markup=False, emoji=False)
    console.print(renderable)
    return "\n".join(line.rstrip() for line in buf.getvalue().splitlines())


def echo(renderable: Any) -> None:
    """Print @renderable: through rich's console on a terminal (the header
    in bold), as :func:`plain` text anywhere else. Neither is fitted to the
    terminal: a wide table's lines wrap there, as plain text would."""
    if sys.stdout.isatty():
        from rich.console import Console

        console = Console(width=_PLAIN_WIDTH, highlight=False, markup=False, emoji=False)
        console.print(_Stripped(renderable))
    else:
        click.echo(plain(renderable))


class _Stripped:
    """@renderable without the blanks that pad its lines to the table's
    width: a terminal narrower than the table wraps only the long lines."""

    def __init__(self, renderable: Any) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.segment import Segment

        for line in console.render_lines(self.renderable, options, pad=False):
            while line and not line[-1].control and not line[-1].text.rstrip():
                line.pop()
            if line and not line[-1].control:
                last = line[-1]
                line[-1] = Segment(last.text.rstrip(), last.style, last.control)
            yield from line
            yield Segment.line()
