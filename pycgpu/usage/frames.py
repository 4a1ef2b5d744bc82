"""The frames of ``pycgpu top``: plain text (pipes, ``--once``, batch mode)
and rich's live display on a terminal (alternate screen, redrawn every
refresh, ANSI only: works over ssh). Kept out of the command module so that
``import pycgpu.cli`` stays small."""

from __future__ import annotations

import time
from typing import Any

import click

from ..formats import DevT
from .view import Monitor, columns, plain_table, sort_rows, summary


def run(monitor: Monitor, names: dict[DevT, str], *, interval: float, sort: str,
        reverse: bool, once: bool, count: int | None, wide: bool, unused: bool,
        tty: bool) -> None:
    """The top command's loop: one frame, batch frames, or the live view."""
    if once:
        monitor.measure(interval)
        if tty:
            from rich.console import Console

            Console().print(rich_frame(monitor, sort, reverse, names, wide, None, unused))
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

        console = Console()

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


def rich_frame(monitor: Monitor, sort: str, reverse: bool, names: dict, wide: bool,
               max_rows: int | None, unused: bool = False) -> Any:
    """A frame for rich: the aligned text table of pycgpu stat, each line
    cropped to the terminal's width (the cgroup path, last, goes first)."""
    from rich.console import Group
    from rich.text import Text

    def line(text: str, style: str = "", overflow: str = "ellipsis") -> Text:
        return Text(text, style=style, no_wrap=True, overflow=overflow)  # type: ignore[arg-type]

    assert monitor.sample is not None
    rows = sort_rows(monitor.rows(unused), sort, reverse)
    shown = rows if max_rows is None else rows[:max(max_rows, 1)]
    parts: list[Any] = [line(summary(monitor, rows, names), "bold")]
    if rows:
        header, cells = columns(shown, names, wide)
        table = plain_table(header, cells).splitlines()
        name_width = max(len(c[0]) for c in cells)
        parts.append(line(table[0].ljust(max(len(t) for t in table)), "reverse", "crop"))
        for text in table[1:]:
            t = line(text)
            t.stylize("cyan", 0, name_width)
            parts.append(t)
    else:
        parts.append(line(f"no GPU usage found (source {monitor.sample.source})", "dim"))
    if len(shown) < len(rows):
        parts.append(line(f"... {len(rows) - len(shown)} more rows (a taller terminal, "
                          "or pycgpu stat)", "dim"))
    for e in monitor.sample.errors[:3]:
        parts.append(line(f"warning: {e}", "yellow"))
    parts.append(line(f"sorted by {sort}{' (reversed)' if reverse else ''}; Ctrl-C quits",
                      "dim"))
    return Group(*parts)


def plain_frame(monitor: Monitor, sort: str, reverse: bool, names: dict, wide: bool,
                unused: bool = False) -> str:
    """A frame as plain text: the summary line, then the table."""
    rows = sort_rows(monitor.rows(unused), sort, reverse)
    lines = [summary(monitor, rows, names), ""]
    if rows:
        lines.append(plain_table(*columns(rows, names, wide)))
    else:
        assert monitor.sample is not None
        lines.append(f"no GPU usage found (source {monitor.sample.source})")
    assert monitor.sample is not None
    lines += [f"warning: {e}" for e in monitor.sample.errors]
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
