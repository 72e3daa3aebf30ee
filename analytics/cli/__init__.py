"""The ``tidelens`` command line: one sub-module per command group, each with ``register()``.

Every command takes ``--db PATH`` (default ``data/tidelens.duckdb``), prints a readable table
by default and JSON with ``--json``, and exits non-zero on bad input with one line per problem
on standard error; with ``--json`` the refusal is also ``{"error": "..."}`` on standard output
(the flags argparse refuses, exit 2, and Tidelens's own refusals, exit 2), so a script reading
the JSON always reads JSON.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
from typing import NoReturn, Sequence, TextIO

import orjson

from analytics.cli.commands import COMMANDS
from analytics.errors import TidelensError
from analytics.text import json_visible, visible


def _command_of(argv: Sequence[str]) -> str | None:
    """The command word of ``argv`` (its first argument not an option), if it names one."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def write_json(obj: object) -> None:
    """``obj`` as indented JSON on standard output; control characters in its strings as JSON
    escapes (the same data). Every command's ``--json`` output and its refusals."""
    sys.stdout.write(json_visible(orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS,
                                               default=str).decode()) + "\n")


def _json_error(message: str) -> None:
    """A refusal as the JSON object a ``--json`` caller reads on standard output."""
    write_json({"error": message})


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every flag ``parser`` takes, its registered subcommands' too (argparse reports a
    subcommand's unknown flag from the top parser, which does not know them)."""
    out: list[str] = []
    for action in parser._actions:
        out.extend(s for s in action.option_strings if s.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                if sub._actions[1:]:  # a command registered, not only named (build_parser)
                    out.extend(_option_strings(sub))
    return list(dict.fromkeys(out))


def suggest(message: str, parser: argparse.ArgumentParser) -> str:
    """argparse's refusal of an unknown flag (or command) with the nearest one it meant, as
    ``git`` says it: Python 3.11's argparse suggests nothing (``--bd`` for ``--db``).

    >>> p = argparse.ArgumentParser(prog="x"); _ = p.add_argument("--db")
    >>> suggest("unrecognized arguments: --bd a.duckdb", p)
    'unrecognized arguments: --bd a.duckdb (did you mean --db?)'
    """
    if message.startswith("unrecognized arguments: "):
        flags = _option_strings(parser)
        meant = [f"{word.split('=')[0]} -> {near[0]}" for word in message.split(": ", 1)[1].split()
                 if word.startswith("-") and (near := difflib.get_close_matches(word.split("=")[0], flags, n=1))]
        if len(meant) == 1:
            return f"{message} (did you mean {meant[0].split(' -> ')[1]}?)"
        if meant:
            return f"{message} (did you mean: {', '.join(meant)}?)"
    elif message.startswith("argument COMMAND: invalid choice: "):
        word = message.split("'")[1] if "'" in message else ""
        near = difflib.get_close_matches(word, list(COMMANDS), n=1)
        if near:
            return f"{message} (did you mean {near[0]}?)"
    return message


def _parser_class(json_errors: bool) -> type[argparse.ArgumentParser]:
    """argparse's parser (its subcommands' too), whose refusal of a flag names the nearest flag
    (:func:`suggest`) and is also a JSON error object on standard output when the command line
    asked for ``--json``."""

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:
            message = suggest(message, self)
            if json_errors:
                _json_error(f"{self.prog}: {message}")
            super().error(message)

    return Parser


def build_parser(command: str | None = None, *, json_errors: bool = False) -> argparse.ArgumentParser:
    """The parser; with ``command``, only that command's module is imported and its arguments
    defined (the others are named with their help, for ``--help`` and errors)."""
    parser = _parser_class(json_errors)(
        prog="tidelens",
        description="Was it the users, or a batch job holding the GPUs? "
                    "Load GPU telemetry, find tail events, model shared vs partitioned pools.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    wanted = {COMMANDS[command][0]} if command else set()
    registered: set[str] = set()
    for name, (module, help_) in COMMANDS.items():
        if module in wanted:
            if module not in registered:
                importlib.import_module(module).register(sub)
                registered.add(module)
        else:
            sub.add_parser(name, help=help_)
    return parser


class _Shown:
    """A text stream whose every write shows control characters as escapes
    (:func:`analytics.text.visible`, newline and tab kept): a file name, a label or an error
    message holding ESC sequences, C1 controls or a bidi override never drives the terminal,
    whichever command printed it."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(visible(text))
        return len(text)

    def write_raw(self, text: str) -> int:
        """``text`` as it is: the CLI's own terminal control (the progress line's carriage
        return and erase, :mod:`analytics.cli.progress`), never text from the data."""
        return self._stream.write(text)

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Shown(out), _Shown(err)  # type: ignore[assignment]
    try:
        json_errors = "--json" in argv[:argv.index("--")] if "--" in argv else "--json" in argv
        parser = build_parser(_command_of(argv), json_errors=json_errors)
        args = parser.parse_args(argv)
        try:
            return int(args.func(args) or 0)
        except TidelensError as exc:
            print(f"tidelens: {exc}", file=sys.stderr)
            if getattr(args, "json", False):
                _json_error(str(exc))
            return 2
        except BrokenPipeError:
            # `tidelens classify | head`: the reader has gone, which is no error of ours. Python's
            # recipe: point stdout at /dev/null so the flush at exit does not raise again.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, out.fileno())
            return 1
    finally:
        sys.stdout, sys.stderr = out, err


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
