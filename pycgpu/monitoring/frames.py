"""The frames of ``pycgpu top``: plain text (pipes, ``--once``, batch mode)
and rich's live display on a terminal (alternate screen, redrawn every
refresh, ANSI only: works over ssh); both draw the table with rich
(:mod:`pycgpu.monitoring.tables`). Kept out of the command module so that ``import
pycgpu.cli`` stays small."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import click

from ..core.formats import DevT, printable_name
from .tables import plain
from .view import Monitor, columns, sort_rows, summary, table

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, OverflowMethod, RenderResult


def run(monitor: Monitor, names: dict[DevT, str], *, interval: float, sort: str,
        reverse: bool, once: bool, count: int | None, wide: bool, unused: bool,
        tty: bool, console: Console | None = None) -> None:
    """The top command's loop: one frame, batch frames, or the live view
    (on @console, by default rich's console on standard output)."""
    if once:
        monitor.measure(interval)
        if tty:
            from rich.console import Console

            (console or Console()).print(
                rich_frame(monitor, sort, reverse, names, wide, None, unused))
        else:
            click.echo(plain_frame(monitor, sort, reverse, names, wide, unused))
        return
    step = max(interval, 0.1)
    try:
        monitor.measure(0)
        if not tty:
            batch(monitor, step, count,
                  lambda: plain_frame(monitor, sort, reverse, names, wide, unused))
            return
        from rich.console import Console
        from rich.live import Live

        console = console or Console()

        def frame() -> Any:
            return rich_frame(monitor, sort, reverse, names, wide, console.size.height - 6,
                              unused)

        refreshes = 0
        with Live(frame(), console=console, screen=True, auto_refresh=False) as live:
            while count is None or refreshes < count:
                sleep_until(monitor, step)
                monitor.measure(0)
                live.update(frame(), refresh=True)
                refreshes += 1
    except KeyboardInterrupt:
        return


def rich_frame(monitor: Monitor, sort: str, reverse: bool, names: dict[DevT, str], wide: bool,
               max_rows: int | None, unused: bool = False) -> Any:
    """A frame for rich: the summary line and the table of pycgpu stat,
    fitted to the terminal's width (the cgroup path gives way first, then
    the columns on the right are cut off)."""
    from rich.console import Group
    from rich.text import Text

    def line(text: str, style: str = "", overflow: OverflowMethod = "ellipsis") -> Text:
        return Text(text, style=style, no_wrap=True, overflow=overflow)

    assert monitor.sample is not None
    rows = sort_rows(monitor.rows(unused), sort, reverse)
    shown = rows if max_rows is None else rows[:max(max_rows, 1)]
    parts: list[Any] = [line(summary(monitor, rows, names), "bold")]
    if rows:
        header, cells = columns(shown, names, wide)
        grid = table(header, cells, header_style="reverse")
        grid.columns[0].style = "cyan"
        parts.append(_Cropped(grid, _fixed_width(header, cells)))
    else:
        parts.append(line(f"no GPU usage found (source {monitor.sample.source})", "dim"))
    if len(shown) < len(rows):
        parts.append(line(f"... {len(rows) - len(shown)} more rows (a taller terminal, "
                          "or pycgpu stat)", "dim"))
    for e in monitor.sample.errors[:3]:
        parts.append(line(f"warning: {printable_name(e)}", "yellow"))
    parts.append(line(f"sorted by {sort}{' (reversed)' if reverse else ''}; Ctrl-C quits",
                      "dim"))
    return Group(*parts)


# what is left of the cgroup path before the table is cropped at the right edge
_CGROUP_MIN = 12


def _fixed_width(header: list[str], cells: list[list[str]]) -> int:
    """The width of the table with the cgroup path cut to _CGROUP_MIN: the
    other columns never shrink (numbers cut short would lie)."""
    from rich.cells import cell_len

    widths = [max(cell_len(h), *(cell_len(c[i]) for c in cells)) for i, h in enumerate(header)]
    if "CGROUP" in header:
        i = header.index("CGROUP")
        widths[i] = min(widths[i], _CGROUP_MIN)
    return sum(widths) + 2 * (len(widths) - 1)


class _Cropped:
    """A table drawn at least @width wide (the cgroup path gives way first,
    down to _CGROUP_MIN), each line then cut at the terminal's right edge:
    on a narrow terminal the columns on the right go, as in top(1)."""

    def __init__(self, table: Any, width: int) -> None:
        self.table, self.width = table, width

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.segment import Segment

        wide = options.update_width(max(options.max_width, self.width))
        for line in console.render_lines(self.table, wide, pad=False):
            yield from Segment.adjust_line_length(line, options.max_width, pad=False)
            yield Segment.line()


def plain_frame(monitor: Monitor, sort: str, reverse: bool, names: dict[DevT, str], wide: bool,
                unused: bool = False) -> str:
    """A frame as plain text: the summary line, then the table."""
    rows = sort_rows(monitor.rows(unused), sort, reverse)
    lines = [summary(monitor, rows, names), ""]
    if rows:
        lines.append(plain(table(*columns(rows, names, wide))))
    else:
        assert monitor.sample is not None
        lines.append(f"no GPU usage found (source {monitor.sample.source})")
    assert monitor.sample is not None
    lines += [f"warning: {printable_name(e)}" for e in monitor.sample.errors]
    return "\n".join(lines)


def sleep_until(monitor: Monitor, step: float) -> None:
    assert monitor.sample is not None
    left = step - (monitor.source.clock() - monitor.sample.time_ns) / 1e9
    if left > 0:
        time.sleep(left)


def batch(monitor: Monitor, step: float, count: int | None, render: Any) -> None:
    """Frames one after another, for pipes and logs."""
    refreshes = 0
    while count is None or refreshes < count:
        sleep_until(monitor, step)
        monitor.measure(0)
        click.echo(render() + "\n")
        refreshes += 1
