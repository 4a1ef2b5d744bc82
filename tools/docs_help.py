#!/usr/bin/env python3
"""Keep the README and docs/*.md in step with the real command line.

- Every ``$ pycgpu ... --help`` line in a code block is followed by the
  command's real help text (80 columns): ``tools/docs_help.py`` rewrites
  those blocks, ``tools/docs_help.py --check`` (and the host test
  tests/host/test_docs.py) fails when one differs.
- docs/commands.md has the help block of every command and subcommand.
- Every example command (``$ pycgpu ...`` or a code line starting with
  ``pycgpu ``) names a real command and only options that command has.

Usage: tools/docs_help.py [--check]
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import click
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
WIDTH = 80
_HELP = re.compile(r"^\$ (pycgpu(?: [a-z0-9-]+)*) --help$")
_FENCE = "```"


def help_text(command: str) -> str:
    from pycgpu.cli import main

    args = [*command.split()[1:], "--help"]
    r = CliRunner().invoke(main, args, terminal_width=WIDTH, prog_name="pycgpu",
                           env={"PYCGPU_CGROUP_ROOT": None})
    if r.exit_code != 0:
        raise RuntimeError(f"{command} --help failed: {r.output}")
    return r.output.rstrip("\n")


def rewrite(text: str) -> str:
    """@text with every help block replaced by the real help."""
    lines = text.split("\n")
    out: list[str] = []
    i, in_code = 0, False
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        if line.startswith(_FENCE):
            in_code = not in_code
            continue
        m = _HELP.match(line) if in_code else None
        if m is None:
            continue
        start = i
        while i < len(lines) and not lines[i].startswith(("$ ", _FENCE)):
            i += 1
        out += help_text(m.group(1)).split("\n")
        if i < len(lines) and lines[i].startswith("$ ") and i > start:
            out.append("")  # one blank line before the next prompt, as written
    return "\n".join(out)


def _examples(text: str) -> list[str]:
    """The example commands of @text; in a help block (the CLI's own text),
    only the lines under its ``Examples:`` heading."""
    found, in_code, in_help, in_examples = [], False, False, False
    for line in text.split("\n"):
        if line.startswith(_FENCE):
            in_code, in_help, in_examples = not in_code, False, False
            continue
        stripped = line.strip()
        if stripped.startswith("$ pycgpu "):
            found.append(stripped[2:])
            in_help, in_examples = stripped.endswith(" --help"), False
        elif in_help:
            in_examples = stripped == "Examples:" or (in_examples and line.startswith("    "))
            if in_examples and stripped.startswith("pycgpu "):
                found.append(stripped)
        elif in_code and stripped.startswith("pycgpu "):
            found.append(stripped)
    return found


def _words(example: str) -> list[str]:
    cut = re.split(r"\s(?:\||#|>|&&|;|<)\s?", example, maxsplit=1)[0]
    try:
        return shlex.split(cut)
    except ValueError:
        return cut.split()


def check_example(example: str) -> str | None:
    """Why @example does not fit the CLI, or None."""
    from pycgpu.cli import main

    words = _words(example)[1:]
    cmd: click.Command = main
    ctx = click.Context(main, info_name="pycgpu")
    options = {o for p in main.params for o in getattr(p, "opts", [])}
    while words and isinstance(cmd, click.Group) and not words[0].startswith("-"):
        sub = cmd.get_command(ctx, words[0])
        if sub is None:
            return f"{example}: no command {words[0]!r}"
        cmd, words = sub, words[1:]
        options |= {o for p in cmd.params for o in getattr(p, "opts", [])}
        options |= {o for p in cmd.params for o in getattr(p, "secondary_opts", [])}
    for w in words:
        if w == "--":
            break
        if w.startswith("-") and w not in ("-", "-h", "--help") and not re.fullmatch(
                r"-\d.*", w):
            name = w.split("=", 1)[0]
            if name not in options:
                return f"{example}: {cmd.name} has no option {name}"
    return None


def commands() -> list[str]:
    """Every command and subcommand of the CLI: ``pycgpu oci patch``, ..."""
    from pycgpu.cli import main

    def walk(cmd: click.Command, name: str, ctx: click.Context) -> list[str]:
        found = [name]
        if isinstance(cmd, click.Group):
            for sub in cmd.list_commands(ctx):
                child = cmd.get_command(ctx, sub)
                if child is not None and not child.hidden:
                    found += walk(child, f"{name} {sub}", click.Context(child, parent=ctx))
        return found

    return walk(main, "pycgpu", click.Context(main, info_name="pycgpu"))[1:]


def problems() -> list[str]:
    found = []
    reference = (ROOT / "docs" / "commands.md").read_text()
    for command in commands():
        if f"\n$ {command} --help\nUsage: {command} " not in reference:
            found.append(f"docs/commands.md: no help block for {command} "
                         f"(add a code block with '$ {command} --help' and run "
                         "tools/docs_help.py)")
    for path in DOCS:
        text = path.read_text()
        if rewrite(text) != text:
            found.append(f"{path.relative_to(ROOT)}: a --help block differs from the CLI "
                         "(run tools/docs_help.py)")
        for example in _examples(text):
            why = check_example(example)
            if why is not None:
                found.append(f"{path.relative_to(ROOT)}: {why}")
    return found


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        found = problems()
        for p in found:
            print(p)
        return 1 if found else 0
    for path in DOCS:
        text = path.read_text()
        new = rewrite(text)
        if new != text:
            path.write_text(new)
            print(f"updated {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main(sys.argv[1:]))
