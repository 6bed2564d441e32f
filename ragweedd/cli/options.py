"""Options both command lines spell the same way (standard library only: ragweedctl imports it).

- ``-n/--limit N``: how many results (search) or passages (ask); ``--top-k``/``-k`` still work,
  hidden and deprecated, so scripts do not break.
- ``--tree``: ask's answer strategy (the API's ``"mode": "tree"``); ``--mode`` means one thing, the
  retrieval kind of ``ragweedd search``. ``ask --mode hybrid|tree`` still works, hidden and deprecated.
- ``--verbose/-v``: one-shot ``ragweedd`` commands print warnings and errors only, one short line
  each; ``--verbose`` adds the info log.
"""

from __future__ import annotations

import argparse
import sys

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: ragweedctl starts without importing typing
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import Any


def positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return n


class DeprecatedAlias(argparse._StoreAction):
    """A renamed option's old spelling: stores as the new one does, and says so on stderr."""

    NEW = {"--top-k": "-n/--limit", "-k": "-n/--limit", "--mode": "--tree"}

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        sys.stderr.write(f"{parser.prog.split()[0]}: {option_string} is deprecated, use "
                         f"{self.NEW.get(option_string or '', 'the new spelling')}\n")
        if option_string == "--mode":
            values = None if values == "hybrid" else values
        super().__call__(parser, namespace, values, option_string)


def add_limit_option(p: argparse.ArgumentParser, help: str, default: int | None = 10) -> None:
    p.add_argument("-n", "--limit", type=positive_int, default=default, metavar="N", help=help)
    p.add_argument("--top-k", "-k", dest="limit", type=positive_int, default=argparse.SUPPRESS, metavar="N",
                   action=DeprecatedAlias, help=argparse.SUPPRESS)


def add_tree_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tree", dest="tree", action="store_const", const="tree", default=None,
                   help="tree mode: the LLM reads the documents' section trees and opens the sections it "
                        "needs (docs/answers.md); default: the passages hybrid search finds")
    p.add_argument("--mode", dest="tree", choices=("hybrid", "tree"), default=argparse.SUPPRESS,
                   action=DeprecatedAlias, help=argparse.SUPPRESS)


def add_verbose_option(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--verbose", "-v", action="store_true",
                   help="also print the info log on stderr (default: warnings and errors only)")
    return p


def hide_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Commands whose names start with "_" (run by the completion scripts) are left out of the
    usage line, of ``--help`` and of argparse's "invalid choice" message, and still accepted."""
    hidden = {n for n in sub.choices if n.startswith("_")}
    if sub.metavar is None:
        sub.metavar = "{" + ",".join(n for n in sub.choices if n not in hidden) + "}"

    class Choices(dict):
        """``choices`` as argparse lists them in its message: without the hidden names (a lookup
        still finds them)."""

        def __iter__(self) -> Iterator[str]:
            return (k for k in dict.__iter__(self) if k not in hidden)

    sub.choices = Choices(sub.choices)
