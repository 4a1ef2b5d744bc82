"""The pycgpu command line (click)."""

from __future__ import annotations

import click

from . import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pycgpu")
def main() -> None:
    """Manage GPU cgroups: GPU time shares, priority and GPU memory limits."""
