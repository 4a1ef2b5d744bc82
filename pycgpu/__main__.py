"""``python -m pycgpu``: the CLI."""

from .cli import main

main(prog_name="pycgpu")
