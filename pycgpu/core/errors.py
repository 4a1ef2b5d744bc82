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

import errno
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


class FileError(Error, OSError):
    """A file the library cannot read or write (a config.json, a CDI spec,
    an attribute of a cgroup's directory): ``errno``, ``strerror`` and
    ``filename`` as the :class:`OSError` it stands for."""


class FileMissing(FileError, FileNotFoundError):
    """A file, or a directory on its path, that does not exist (ENOENT)."""


def file_error(e: OSError) -> FileError:
    """@e as a library error, with its errno, strerror and file names:
    :class:`FileMissing` for ENOENT, else :class:`FileError` (@e itself
    when it is one already)."""
    if isinstance(e, FileError):
        return e
    cls = FileMissing if e.errno == errno.ENOENT else FileError
    if e.errno is None:
        return cls(*e.args)
    return cls(e.errno, e.strerror, e.filename, None, e.filename2)
