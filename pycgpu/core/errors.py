"""The base of every error pycgpu's library raises.

:class:`Error` is what a program catches to handle any of them; each
module's errors derive from it, and from the built-in class callers have
relied on (:class:`OSError` for what the system refused, :class:`ValueError`
for a bad value, :class:`LookupError` for something not found). A message
says what went wrong in the library's own words, never in a command line's
(no options, no commands to run): @reason, a short token from the raising
module's constants, lets a caller (the CLI) add the advice that fits it.
"""

from __future__ import annotations

from collections.abc import Mapping


class Error(Exception):
    """Any error of pycgpu's library. @reason tells errors of one class
    apart for a caller choosing advice ("" when there is nothing to tell);
    @details holds the values that advice names (a group, a value)."""

    reason: str = ""
    details: Mapping[str, str] = {}

    def because(self, reason: str, **details: str) -> Error:
        """This error, with @reason and @details set (for ``raise ... .because(...)``)."""
        self.reason = reason
        self.details = details
        return self
