"""What a long command is doing, as one line on a terminal: ``tidelens: review: tail events...``.

A command that works for more than a second (the review, the events and a postmortem, a
calibration, the bundled sample's first build) says its stage, so nobody at the shell wonders
whether it hangs and starts it again. The line is written to standard error, rewritten in place
(carriage return, then the line cleared) and erased when the command is done: standard output
stays the command's answer alone. It is written only to a terminal and never with ``--json``, so
a script, a pipe or a redirect reads exactly what it read before.

The library reports its stages through a plain callable (``on_stage(words)``); this is the CLI's.
"""

from __future__ import annotations

import argparse
import sys
from types import TracebackType
from typing import TextIO

from analytics.text import visible

# ANSI "erase to the end of the line" (ECMA-48 EL): a shorter stage leaves no tail of the longer.
_CLEAR = "\r\x1b[K"


def shows_progress(args: argparse.Namespace, stream: TextIO) -> bool:
    """True when a progress line helps: ``stream`` is a terminal and the command prints no JSON."""
    if getattr(args, "json", False):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Progress:
    """The stage line of one command; call it with each stage's words, use it as a context manager.

    Parameters
    ----------
    what:
        The work, said before each stage (``review``).
    args:
        The command's arguments (``--json`` turns the line off).
    stream:
        Where the line goes (standard error by default).

    Examples
    --------
    >>> import io
    >>> class Tty(io.StringIO):
    ...     def isatty(self): return True
    >>> out = Tty()
    >>> with Progress("review", argparse.Namespace(json=False), out) as stage:
    ...     stage("tail events")
    >>> out.getvalue().split("\\r")[1]
    '\\x1b[Ktidelens: review: tail events...'
    >>> piped = io.StringIO()
    >>> with Progress("review", argparse.Namespace(json=False), piped) as stage:
    ...     stage("tail events")
    >>> piped.getvalue()
    ''
    """

    def __init__(self, what: str, args: argparse.Namespace, stream: TextIO | None = None) -> None:
        self.what = what
        self.stream = stream if stream is not None else sys.stderr
        self.on = shows_progress(args, self.stream)
        self._shown = False

    def __call__(self, stage: str) -> None:
        if not self.on:
            return
        self._write(f"{_CLEAR}tidelens: {visible(self.what, keep='')}: {visible(stage, keep='')}...")
        self._shown = True

    def done(self) -> None:
        """Erase the line (the command's answer, or its refusal, follows on a clean line)."""
        if self._shown:
            self._write(_CLEAR)
            self._shown = False

    def _write(self, text: str) -> None:
        # The CLI shows every control character it prints as an escape (analytics.cli._Shown):
        # its own carriage return and erase go past that, the words through ``visible``.
        getattr(self.stream, "write_raw", self.stream.write)(text)
        self.stream.flush()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.done()
