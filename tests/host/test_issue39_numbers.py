"""Issue 39, item 11: one parser of integers (formats.parse_number) for the
kernel's files, the CLI's and annotations' values and the device plugin's
settings, where three copies had drifted."""

from __future__ import annotations

import pytest

from pycgpu.core import formats, model
from pycgpu.k8s import shares


def test_the_copies_are_gone():
    assert [m.__name__ for m in (formats, model, shares) if hasattr(m, "_int")] == []


@pytest.mark.parametrize(("call", "message"), [
    (lambda: formats.parse_int("high", "gpu.priority"), "gpu.priority: 'high' is not an integer"),
    (lambda: formats.parse_flat_keyed("226:128 " + "1" * 5000), "is out of range"),
    (lambda: formats.parse_number("x", "--priority 'x'", "N"),
     "--priority 'x': 'x' is not an integer (give N)"),
    (lambda: formats.parse_number("1" * 21, "--weight", "W"),
     "--weight: '111111111111111111111' is out of range (give W)"),
])
def test_the_messages_stay(call, message):
    with pytest.raises(formats.FormatError) as info:
        call()
    assert message in str(info.value)


def test_a_kernel_number_with_leading_zeros_is_the_number():
    """The kernel's parser refused a 64-bit number padded past 21 characters
    as 'not a 64-bit integer'; a person's parser took it."""
    assert formats.parse_int("0" * 21 + "7") == 7 == formats.parse_number("0" * 21 + "7", "x", "N")


@pytest.mark.parametrize("text", ["ten", "-3", "+3", "\u0663", "1" * 10])
def test_shares_take_a_whole_number_of_ascii_digits(text):
    """The plugin's share counts: as before, no sign and at most 9 digits;
    digits of other scripts ('\u0663', Arabic-Indic three) were taken by
    \\d and are refused as everywhere else in pycgpu."""
    with pytest.raises(shares.ShareError, match=r"^--shares '.*': '.*' is (not a whole number|"
                                                r"out of range)"):
        shares.parse_config([text], 100, [], names=shares.ConfigNames(shares="--shares"))


def test_shares_still_take_what_they_took():
    assert shares.parse_config([" 4 "], 100, [])[0] == shares.parse_config(["4"], 100, [])[0]
