"""One vocabulary in both command lines (issue 24, point 6): every option and positional has help
text, "how many results" is ``-n/--limit`` in both (``--top-k`` a hidden, deprecated alias),
``--mode`` is only the retrieval kind (ask's strategy is ``--tree``), and hidden commands stay
hidden, even in argparse's "invalid choice" message."""

from __future__ import annotations

import argparse

import pytest

from ragweedd.cli import command, ctl
from ragweedd.cli.exits import UsageError

PARSERS = {"ragweedd": command.build_parser, "ragweedctl": ctl.build_parser}


def walk(parser: argparse.ArgumentParser, path: str):
    """(command path, action) for every action of the parser and of its sub-commands."""
    for act in parser._actions:
        if isinstance(act, argparse._SubParsersAction):
            for name, sp in act.choices.items():
                if not name.startswith("_"):
                    yield from walk(sp, f"{path} {name}")
        else:
            yield path, act


@pytest.mark.parametrize("prog", sorted(PARSERS))
def test_every_option_and_positional_has_help(prog):
    missing, orphans = [], []
    for path, act in walk(PARSERS[prog](), prog):
        if isinstance(act, argparse._HelpAction):
            continue
        name = "/".join(act.option_strings) or act.dest
        if act.help == argparse.SUPPRESS:
            # a hidden alias is only the old spelling of a documented option
            siblings = [a for p, a in walk(PARSERS[prog](), prog) if p == path and a.dest == act.dest
                        and a.help not in (None, "", argparse.SUPPRESS)]
            if not siblings:
                orphans.append(f"{path} {name}")
        elif not (act.help or "").strip():
            missing.append(f"{path} {name}")
    assert not missing, "options without help text: " + ", ".join(missing)
    assert not orphans, "hidden options that are not an alias of a documented one: " + ", ".join(orphans)


def test_the_walk_sees_a_missing_help():
    p = argparse.ArgumentParser(prog="x")
    sub = p.add_subparsers(dest="cmd")
    sub.add_parser("a").add_argument("--offset")
    assert [a.dest for _, a in walk(p, "x") if not isinstance(a, argparse._HelpAction) and not a.help] \
        == ["offset"]


@pytest.mark.parametrize("prog", sorted(PARSERS))
def test_every_command_has_help(prog):
    def commands(parser, path):
        for act in parser._actions:
            if isinstance(act, argparse._SubParsersAction):
                helped = {c.dest for c in act._choices_actions if (c.help or "").strip()}
                for name, sp in act.choices.items():
                    if not name.startswith("_"):
                        yield f"{path} {name}", name in helped
                        yield from commands(sp, f"{path} {name}")

    missing = [name for name, ok in commands(PARSERS[prog](), prog) if not ok]
    assert not missing, "commands without help text: " + ", ".join(missing)


@pytest.mark.parametrize("prog", sorted(PARSERS))
def test_hidden_command_not_offered_in_invalid_choice_message(prog):
    parser = PARSERS[prog]()
    with pytest.raises(UsageError) as e:
        parser.parse_args(["nope"])
    message = str(e.value)
    assert "invalid choice: 'nope'" in message and "'search'" in message
    assert "_collections" not in message
    assert parser.format_help().count("_collections") == 0
    assert parser.parse_args(["_collections"]) is not None  # still runs for the completion scripts


@pytest.mark.parametrize("prog", sorted(PARSERS))
@pytest.mark.parametrize("cmd", ["search", "ask"])
def test_one_spelling_for_how_many_results(prog, cmd, capsys):
    parser = PARSERS[prog]()
    sp = parser._subparsers._group_actions[0].choices[cmd]  # type: ignore[union-attr]
    shown = [s for a in sp._actions if a.help != argparse.SUPPRESS for s in a.option_strings]
    assert "-n" in shown and "--limit" in shown
    assert "--top-k" not in shown and "-k" not in shown
    assert "--top-k" not in sp.format_help()
    assert parser.parse_args([cmd, "q", "-n", "3"]).limit == 3
    assert parser.parse_args([cmd, "q", "--limit", "4"]).limit == 4
    capsys.readouterr()
    # the old spelling still works (scripts), and says it is deprecated
    assert parser.parse_args([cmd, "q", "--top-k", "5"]).limit == 5
    assert "--top-k is deprecated, use -n/--limit" in capsys.readouterr().err
    with pytest.raises(UsageError):
        parser.parse_args([cmd, "q", "-n", "0"])


@pytest.mark.parametrize("prog", sorted(PARSERS))
def test_mode_is_the_retrieval_kind_and_ask_takes_tree(prog, capsys):
    parser = PARSERS[prog]()
    subs = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    ask_help = subs["ask"].format_help()
    assert "--mode" not in ask_help and "--tree" in ask_help
    assert parser.parse_args(["ask", "q", "--tree"]).tree == "tree"
    assert parser.parse_args(["ask", "q"]).tree is None
    capsys.readouterr()
    assert parser.parse_args(["ask", "q", "--mode", "tree"]).tree == "tree"  # the old spelling, deprecated
    assert "--mode is deprecated, use --tree" in capsys.readouterr().err
    if prog == "ragweedd":
        assert "--mode {hybrid,dense,keyword}" in subs["search"].format_help()
        answers = subs["eval"]._subparsers._group_actions[0].choices["answers"]
        assert "--mode" not in answers.format_help() and "--tree" in answers.format_help()


@pytest.mark.parametrize("cmd", [["ingest", "x", "-c", "c"], ["search", "q"], ["ask", "q"], ["check-config"],
                                 ["doctor"], ["eval", "beir", "d"], ["eval", "questions", "f", "-c", "c"],
                                 ["eval", "answers", "f"], ["migrate", "--to", "postgresql://x"], ["reembed"]])
def test_every_one_shot_command_takes_verbose(cmd):
    parser = command.build_parser()
    assert parser.parse_args(cmd).verbose is False
    assert parser.parse_args([*cmd, "--verbose"]).verbose is True
    assert parser.parse_args([*cmd, "-v"]).verbose is True
