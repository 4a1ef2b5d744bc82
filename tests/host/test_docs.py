"""The README and docs/*.md against the real CLI (tools/docs_help.py): the
--help blocks are the CLI's output, the example commands exist with the
options they use, and every exit status the docs state is checked."""

from __future__ import annotations

import errno
import importlib
import os
import re
import shlex
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from pycgpu.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

import docs_help


def test_docs_match_the_cli():
    assert docs_help.problems() == []


def test_every_command_has_its_help_in_the_reference():
    listed = docs_help.commands()
    assert {"pycgpu top", "pycgpu oci unpatch", "pycgpu k8s device-plugin"} <= set(listed)
    text = (docs_help.ROOT / "docs" / "commands.md").read_text()
    assert [c for c in listed if f"\n$ {c} --help\nUsage: {c} " not in text] == []


def test_a_command_without_a_help_block_is_reported(monkeypatch):
    monkeypatch.setattr(docs_help, "commands", lambda: ["pycgpu top", "pycgpu frobnicate"])
    assert ("docs/commands.md: no help block for pycgpu frobnicate (add a code block with "
            "'$ pycgpu frobnicate --help' and run tools/docs_help.py)") in docs_help.problems()


def test_example_checker_catches_drift():
    assert docs_help.check_example("pycgpu set a --weight 5") is None
    assert docs_help.check_example("pycgpu exec a --dry-run -- ls -l") is None
    assert docs_help.check_example("pycgpu oci unpatch c.json --keep-devices") is None
    assert "no command 'frobnicate'" in docs_help.check_example("pycgpu frobnicate")
    assert "set has no option --wieght" in docs_help.check_example("pycgpu set a --wieght 5")


def test_a_stale_help_block_is_rewritten():
    stale = "```\n$ pycgpu schema --help\nUsage: old\n```\n"
    new = docs_help.rewrite(stale)
    assert new != stale and "pycgpu schema [OPTIONS] [NAME]" in new
    assert docs_help.rewrite(new) == new


def test_monitoring_doc_lists_every_metric():
    from pycgpu.monitoring.exporter import FAMILIES

    text = (docs_help.ROOT / "docs" / "monitoring.md").read_text()
    for name, family in FAMILIES.items():
        assert f"| `{name}` | {family.type} |" in text, name


# exit statuses the docs state ------------------------------------------------------------------
#
# Every place README.md's command-line section or docs/*.md states an exit status is either an
# example marked `# exit N` (run on the fake host by test_examples_with_an_exit_status, its
# output compared with the text) or a sentence listed in EXIT_CLAIMS with the tests that check
# it. test_every_stated_exit_status_is_checked finds the statements: one that is neither fails.

HELP_EXIT_CODES = "Exit codes: 0 success 1 the kernel or the system refused or lacks something"
EXIT_CLAIMS: dict[str, dict[str, list[str]]] = {
    "README.md": {
        HELP_EXIT_CODES: ["test_docs.py::test_the_exit_codes"],
        "Exit codes: 0 success; 1 the kernel or the system refused (the change was rolled back); "
        "2 usage error": ["test_docs.py::test_the_exit_codes"],
    },
    "docs/cli.md": {
        HELP_EXIT_CODES: ["test_docs.py::test_the_exit_codes"],
        "and pycgpu exits 128 + the signal's number (130 for SIGINT, 143 for SIGTERM, 129 for "
        "SIGHUP) with":
            ["test_concurrency.py::test_a_signal_between_two_writes_leaves_the_tree_as_before",
             "test_issue39_cli_signals.py::test_any_ending_signal_between_two_writes_is_rolled_back",
             "test_issue39_cli_signals.py::test_sigint_before_the_first_write_is_not_aborted_exit_1",
             "test_issue39_signal_mask.py::test_two_signals_between_two_writes_are_both_named",
             "test_issue39_signal_mask.py::"
             "test_sigterm_while_waiting_for_the_lock_says_nothing_was_changed"],
        "change: the run exits 0, with `warning: SIGINT came after the last write":
            ["test_issue39_cli_signals.py::"
             "test_a_signal_after_the_last_write_says_the_change_is_complete",
             "test_issue39_signal_mask.py::test_two_signals_after_the_last_write_are_both_named",
             "test_issue39_signal_mask.py::"
             "test_sigint_right_after_the_apply_says_the_change_is_complete"],
        "for another reason (exit 1 or 2, nothing written) is named in `warning: SIGTERM came "
        "as the run failed":
            ["test_issue39_signal_mask.py::"
             "test_a_signal_as_the_run_fails_is_named_and_the_failure_stands"],
        "A signal after the last write leaves the change complete: exit 0 and a warning that "
        "says so":
            ["test_issue39_cli_signals.py::"
             "test_a_signal_after_the_last_write_says_the_change_is_complete"],
        "### Exit codes | code | meaning |": ["test_docs.py::test_the_exit_codes"],
        "is refused before anything is written, with exit 2; kernel refusals are translated":
            ["test_docs.py::test_examples_with_an_exit_status"],
        "and exit 1, with what was already written undone":
            ["test_docs.py::test_examples_with_an_exit_status",
             "test_all_or_none.py::test_set_with_a_malformed_knob_file_changes_nothing"],
        "and a `create` or `set` that reads it, exit 1 with one line":
            ["test_docs.py::test_unparsable_files",
             "test_cli_show.py::test_show_unparsable_file_names_it",
             "test_all_or_none.py::test_non_utf8_file_content_is_one_line"],
        "a number of thousands of digits exits 2":
            ["test_all_or_none.py::test_a_path_component_over_255_bytes",
             "test_all_or_none.py::test_huge_numbers_on_the_command_line"],
        "(exit 127 or 126 as the real run would)":
            ["test_cli_exec.py::test_dry_run_checks_the_command",
             "test_docs.py::test_the_exit_codes"],
        "on a group that does not exist exit 2":
            ["test_cli_monitor.py::test_stat_on_a_missing_group_is_an_error"],
        "exits 1 with the fix":
            ["test_cli_monitor.py::test_kernel_source_without_the_controller_is_an_error",
             "test_docs.py::test_kernel_source_on_a_group_without_gpu"],
    },
    # the commands' own help texts (docs/commands.md is generated from them)
    "docs/commands.md": {
        "The exit status is COMMAND's (128+N if a signal N ended it; 126: it cannot be "
        "executed, 127: not found, and the groups are removed all the same)":
            ["test_cli_run.py::test_the_status_is_the_commands",
             "test_cli_run.py::test_a_command_a_signal_ended_gives_128_plus_it",
             "test_cli_run.py::test_command_not_executable_leaves_nothing",
             "test_cli_run.py::test_command_not_found_leaves_nothing"],
        "the exit status is COMMAND's own (126: it cannot be executed, 127: not found)":
            ["test_cli_exec.py::test_exit_status_passes_through",
             "test_cli_exec.py::test_command_not_executable",
             "test_cli_exec.py::test_command_not_found"],
        "Exits 0 when everything is in place and 3 when a problem was found":
            ["test_capabilities.py::test_cli_check_ok"],
        "Exit codes: 0 done; 1 the file cannot be read or written (it is unchanged); 2 bad "
        "input (not JSON, a field of the wrong type, a bad value, unknown DEV): nothing is "
        "written":
            ["test_oci.py::test_an_unwritable_directory_leaves_the_original_intact",
             "test_oci.py::test_unreadable_device_node_is_a_refusal",
             "test_oci.py::test_bad_configs_are_refused_untouched",
             "test_oci.py::test_bad_options_are_refused_untouched"],
        "Exit codes: 0 applied (or nothing to do); 1 the host refused or lacks something, or "
        "the allow-list file is not trusted; 2 bad state or annotations (an annotation not on "
        "the allow-list included); 3 the image check failed":
            ["test_hook.py::test_nothing_to_do_without_pycgpu_annotations",
             "test_hook.py::test_an_untrusted_or_wrong_allow_list_refuses",
             "test_hook.py::test_priority_is_off_without_an_allow_list",
             "test_hook.py::test_a_kernel_refusal_rolls_everything_back",
             "test_hook.py::test_a_host_without_the_gpu_controller",
             "test_hook.py::test_bad_state",
             "test_hook.py::test_image_check_enforce_refuses_a_mismatch"],
        "Exit codes: 0 written; 1 no render nodes or the file cannot be written; 2 unknown DEV "
        "or --hook-allow KEY":
            ["test_cdi.py::test_unwritable_output_is_a_refusal",
             "test_cdi.py::test_hook_allow",
             "test_cdi.py::test_no_render_nodes", "test_cdi.py::test_unknown_device"],
        "Exits 0 when everything fits, 3 on a mismatch":
            ["test_imagecheck.py::test_cli_text_and_exit_codes"],
        "Exit codes: 0 stopped; 1 the plugin's socket cannot be created or grpcio/protobuf "
        "are missing (pip install 'pycgpu[k8s]'); 2 a bad default option value":
            ["test_k8s_plugin.py::test_cli_plugin_process",
             "test_k8s_api.py::test_without_grpc_the_device_plugin_names_the_extra",
             "test_k8s_plugin.py::test_cli_bad_default_is_one_line",
             "test_docs.py::test_a_bad_k8s_default"],
        "Exit codes: 0 shown; 2 a bad default (a per-device entry that is wrong is a warning, "
        "as in the plugin)":
            ["test_k8s_plugin.py::test_cli_inventory", "test_docs.py::test_a_bad_k8s_default"],
    },
    "docs/kubernetes.md": {
        "a wrong default (`--shares 0`) stops the command (exit 2)":
            ["test_k8s_plugin.py::test_cli_bad_default_is_one_line",
             "test_docs.py::test_a_bad_k8s_default"],
        "An annotation that is not allowed refuses the container (exit 2, the runtime does not "
        "start it) and nothing is written":
            ["test_hook.py::test_priority_is_off_without_an_allow_list",
             "test_hook.py::test_the_node_file_sets_the_allow_list"],
    },
    "docs/runtimes.md": {
        "exit non-zero (2 bad input, 1 refused, 3 image mismatch)":
            ["test_hook.py::test_bad_state",
             "test_hook.py::test_a_kernel_refusal_rolls_everything_back",
             "test_hook.py::test_image_check_enforce_refuses_a_mismatch"],
        "# exit 0: fits; 3: mismatch": ["test_imagecheck.py::test_cli_text_and_exit_codes"],
        "is one line and exit 2, never a traceback, with the file left as it was":
            ["test_bad_json.py::test_a_config_pycgpu_cannot_take_is_one_line",
             "test_bad_json.py::test_the_hook_on_a_config_it_cannot_take",
             "test_bad_json.py::test_the_hook_on_a_state_it_cannot_take"],
    },
}

_STATED = re.compile(r"\bexit(?:s|ing)?\b(?: (?:codes?|status))?(?P<rest>[^.|\n]{0,40})", re.I)
_EXAMPLE = re.compile(r"^\$ (pycgpu .*?)\s+# exit (\d+)\b.*$", re.M)


def doc_texts() -> dict[str, str]:
    """README.md's command-line section and docs/*.md, by path."""
    out = {}
    for path in docs_help.DOCS:
        text = path.read_text()
        if path.name == "README.md":
            start = text.index("## The command line")
            text = text[start:text.index("\n## ", start + 1)]
        out[str(path.relative_to(docs_help.ROOT))] = text
    return out


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def stated_exit_statuses(text: str) -> list[tuple[int, str]]:
    """(offset in the flattened @text, excerpt) of each statement of an exit status."""
    flat = _flat(text)
    return [(m.start(), flat[m.start():m.end()]) for m in _STATED.finditer(flat)
            if re.search(r"\d", m.group("rest")) or m.group().startswith("Exit codes")]


def test_every_stated_exit_status_is_checked():
    unchecked = []
    for name, text in doc_texts().items():
        flat = _flat(text)
        phrases = list(EXIT_CLAIMS.get(name, {}))
        phrases += [_flat(m.group()) for m in _EXAMPLE.finditer(text)]
        spans = [(m.start(), m.end()) for p in phrases for m in re.finditer(re.escape(p), flat)]
        for offset, excerpt in stated_exit_statuses(text):
            if not any(a <= offset < b for a, b in spans):
                unchecked.append(f"{name}: {excerpt!r}")
    assert unchecked == [], "exit statuses stated without a check (add to EXIT_CLAIMS)"


def test_the_claims_are_in_the_docs_and_their_tests_exist():
    texts = doc_texts()
    for name, claims in EXIT_CLAIMS.items():
        for phrase, tests in claims.items():
            assert phrase in _flat(texts[name]), (name, phrase)
            for test in tests:
                module, _, func = test.partition("::")
                assert hasattr(importlib.import_module(module.removesuffix(".py")), func), test


def test_the_checker_finds_statements():
    found = [e for _, e in stated_exit_statuses("It stops (exit\n2). It exits (plain text).\n"
                                                "A run exits 1 with the fix. Exit codes:")]
    assert found == ["exit 2)", "exits 1 with the fix", "Exit codes:"]


# the examples marked `# exit N` --------------------------------------------------------------


def _make(rel: str, fail: dict[str, int] | None = None):
    """Make the group @rel; then the writes to the files of @fail fail."""
    def setup(fake):
        fake.make(rel)
        fake.fail.update(fail or {})
    return setup


def _without_memory(fake):
    fake.memory = False
    fake.make("ai/train")


# how the fake host is prepared for each example; the cgroup root is /sys/fs/cgroup in the text
EXAMPLE_SETUPS = {
    "pycgpu create ai/train --weight 0": lambda fake: None,
    "pycgpu create ai/infer --weight 0": lambda fake: None,
    "pycgpu set ai/train --weight renderD130=5": _make("ai/train"),
    "pycgpu set ai/train --weight 300 --weight 226:250=5": _make("ai/train"),
    "pycgpu set ai/train --priority 5000": _make("ai/train"),
    "pycgpu set ai/train --priority 5 --memory-max renderD128=1G": _without_memory,
    "pycgpu set ai/train --weight 300 --priority 5":
        _make("ai/train", {"ai/train/gpu.weight": errno.EACCES}),
    "pycgpu exec ai -- ./bench": _make("ai/train", {"ai/cgroup.procs": errno.EBUSY}),
    "pycgpu --cgroup-root /mnt/cg create /sys/fs/cgroup/x": lambda fake: None,
}


def examples() -> list[tuple[str, str, int, list[str]]]:
    """(doc, command, exit status, the output the text shows) of each `# exit N` example."""
    out = []
    for name, text in doc_texts().items():
        lines = text.splitlines()
        for i, line in enumerate(lines):
            m = _EXAMPLE.match(line)
            if m:
                shown = []
                for after in lines[i + 1:]:
                    if after.startswith(("$ ", "```")):
                        break
                    shown.append(after)
                out.append((name, m.group(1), int(m.group(2)), shown))
    return out


def test_there_are_examples_with_an_exit_status():
    assert {(doc, code) for doc, _, code, _ in examples()} >= {
        ("docs/cli.md", 1), ("docs/cli.md", 2), ("README.md", 2)}


@pytest.mark.parametrize(("doc", "command", "code", "shown"), examples(),
                         ids=[f"{d}:{c}" for d, c, _, _ in examples()])
def test_examples_with_an_exit_status(cli, monkeypatch, doc, command, code, shown):
    """The example exits as the text says, prints what the text shows, and
    (failing) leaves the tree as it was."""
    assert command in EXAMPLE_SETUPS, f"{doc}: no EXAMPLE_SETUPS entry for {command!r}"
    fake = cli.fake
    EXAMPLE_SETUPS[command](fake)
    root = str(fake.root)
    monkeypatch.setattr(os, "execvp", lambda *a: pytest.fail(f"{command} ran a program"))
    # the text's --cgroup-root /mnt/cg is the fake tree
    argv = [root if w == "/mnt/cg" else w for w in shlex.split(command)[1:]]
    before = fake.snapshot()
    r = CliRunner().invoke(main, argv, env=cli.env)
    if r.exception and not isinstance(r.exception, SystemExit):
        raise r.exception
    assert r.exit_code == code, (r.exit_code, r.output)
    named = "/mnt/cg" if "/mnt/cg" in command else "/sys/fs/cgroup"
    output = r.output.replace(root, named).replace(f"'{os.getpid()}'", "'4242'")
    assert output.splitlines() == shown
    if code:
        assert fake.snapshot() == before


# claims checked here ---------------------------------------------------------------------------


def test_the_exit_codes(cli, tmp_path):
    """The table of exit codes (pycgpu --help, docs/cli.md, README.md), one case each."""
    fake = cli.fake
    cli("devices")  # 0
    fake.make("a")
    before = fake.snapshot()
    fake.fail["a/gpu.weight"] = errno.EACCES
    assert "permission denied" in cli("set", "a", "--weight", "5", code=1).output
    assert fake.snapshot() == before  # refused: rolled back
    assert "out of range" in cli("set", "a", "--weight", "0", code=2).output
    assert "unknown device" in cli("set", "a", "--weight", "renderD7=5", code=2).output
    assert "does not exist" in cli("set", "nope", "--weight", "5", code=2).output
    assert fake.snapshot() == before and fake.log == []  # usage errors: nothing written
    cli("check", "--path", "nope", code=3)
    cli("exec", "--dry-run", "a", "--", "no-such-command-pycgpu", code=127)
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\n")  # not executable
    cli("exec", "--dry-run", "a", "--", str(script), code=126)
    assert fake.snapshot() == before


def test_unparsable_files(cli):
    fake = cli.fake
    fake.make("a")
    (fake.root / "a" / "gpu.priority").write_text("high\n")
    before = fake.snapshot()
    for command in (["show", "a"], ["create", "a/b", "--priority", "5"],
                    ["set", "a", "--priority", "5"]):
        r = CliRunner().invoke(main, command, env=cli.env)
        assert r.exit_code == 1, (command, r.output)
        assert r.stdout == "" and len(r.stderr.splitlines()) == 1
        assert f"{fake.root}/a/gpu.priority" in r.stderr
    assert fake.snapshot() == before
    (fake.root / "a" / "gpu.stat").write_bytes(b"\xff\n")
    r = CliRunner().invoke(main, ["stat", "-i", "0"], env=cli.env)  # warns and goes on
    assert r.exit_code == 0 and "not UTF-8" in r.stderr and "not UTF-8" not in r.stdout


def test_kernel_source_on_a_group_without_gpu(cli):
    cli.fake.make("a")
    (cli.fake.root / "plain").mkdir()  # after +gpu: no gpu.* files
    r = cli("stat", "--source", "kernel", "-i", "0", "plain", code=1)
    assert "has no gpu.stat" in r.output and "fix: pycgpu create /plain --exist-ok" in r.output


def test_a_bad_k8s_default(cli):
    for command in ("inventory", "device-plugin"):
        r = cli("k8s", command, "--shares", "0", code=2)
        assert r.output.splitlines() == ["Error: --shares '0': 0 shares is out of range [1, 100]"]
