"""Exit codes of ragweedd and ragweedctl, and the one table that maps an error to its code.

Both programs map an error's ``code`` (the ``{"error": {"code", ...}}`` of the API and of
``--json``) and its HTTP status the same way, so a script sees the same exit code for "collection
not found" whether it ran ``ragweedd search`` or ``ragweedctl search``. The table is in
docs/api.md. Imported by ragweedctl at start-up: argparse, json, sys and ragweedd.errors only.
"""

from __future__ import annotations

import argparse
import json
import sys

from ragweedd.errors import RequestError

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: ragweedctl starts without importing typing
if TYPE_CHECKING:
    from typing import NoReturn, TextIO

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_NOT_RUNNING = 0, 1, 2, 3
EXIT_INTERRUPTED = 130

# 4xx statuses that are not the request's fault: a provider's rate limit (429, retry later) and a
# file that cannot be extracted (422) are failures like a 5xx
_FAILED_4XX = (422, 429)


def exit_code_for(code: str | None, http_status: int | None = None) -> int:
    """2 when the request itself was wrong (bad name, unknown collection or document, bad config,
    usage), 1 when ragweedd failed doing it, 3 when no daemon runs, 130 when interrupted."""
    if code == "daemon_not_running":
        return EXIT_NOT_RUNNING
    if code in ("interrupted", "cancelled"):
        return EXIT_INTERRUPTED
    if code in ("usage", "bad_request", "config", "not_found"):
        return EXIT_USAGE
    if http_status is not None and 400 <= http_status < 500 and http_status not in _FAILED_4XX:
        return EXIT_USAGE
    return EXIT_ERROR


def argv_wants_json(argv: list[str]) -> bool:
    """Whether ``--json`` is on the command line, before a ``--`` (argparse may not have parsed
    it yet: a usage error stops it first)."""
    for arg in argv:
        if arg == "--":
            return False
        if arg == "--json":
            return True
    return False


def print_json_error(out: TextIO, code: str, message: str, hint: str | None = None) -> None:
    err = {"code": code, "message": message}
    if hint:
        err["hint"] = hint
    out.write(json.dumps({"error": err}, ensure_ascii=False) + "\n")
    out.flush()


class UsageError(RequestError):
    """What argparse would print and exit 2 for; raised instead so that --json can print it."""

    code = "usage"

    def __init__(self, message: str, prog: str, usage: str) -> None:
        super().__init__(message, hint=f"see `{prog} --help`")
        self.prog = prog
        self.usage = usage

    def report(self, err: TextIO, out: TextIO, as_json: bool) -> int:
        # argparse's own words on stderr (the usage line says what to do)
        err.write(self.usage)
        err.write(f"{self.prog}: error: {self.message}\n")
        if as_json:
            try:
                print_json_error(out, self.code, self.message, self.hint)
            except BrokenPipeError:  # its reader is gone: the exit code still tells
                quiet_broken_pipe(out)
        return EXIT_USAGE


class UsageErrorParser(argparse.ArgumentParser):
    """An ArgumentParser whose ``error`` raises UsageError (sub-parsers inherit the class)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, self.prog, self.format_usage())


def quiet_broken_pipe(out: TextIO | None = None) -> int:
    """A reader that closed stdout early (``| head``) got what it wanted: no traceback, exit 0.

    stdout is pointed at /dev/null so that the interpreter's final flush at exit does not fail
    again on the closed pipe."""
    import os

    if out is not None and out is not sys.stdout:
        return EXIT_OK
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout is not a real file (tests pass a StringIO)
        pass
    return EXIT_OK
