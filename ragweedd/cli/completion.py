"""Shell completion scripts (bash, zsh, fish) and a roff man page, generated from argparse parsers.

Both ``ragweedctl`` and ``ragweedd`` print them (``completion SHELL``, ``man``) from their own
``build_parser()``, so a new subcommand or option is completed and documented with no second list
to keep. The parsers are walked once into ``Node``s: per command path (``""``, ``"status"``,
``"eval beir"``) its options (with the values they take), its positional choices and its
subcommands. Only names made of safe characters get into a script; help text is quoted.

Imported only by those two commands: normal start-up never pays for it.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from datetime import date

SAFE_WORD = re.compile(r"[A-Za-z0-9_.:+=,/@%-]+")
FILE_HINTS = ("FILE", "PATH", "DIR", "FOLDER")


@dataclass
class Opt:
    flags: list[str]
    takes_value: bool
    choices: list[str]
    files: str  # "" (no file completion), "f" (files) or "d" (directories)
    help: str
    metavar: str


@dataclass
class Node:
    path: str  # "" for the program itself, else the subcommand words joined by spaces
    parser: argparse.ArgumentParser
    help: str = ""
    options: list[Opt] = field(default_factory=list)
    words: list[str] = field(default_factory=list)  # positional choices
    positional_files: bool = False
    subs: dict[str, Node] = field(default_factory=dict)


def _help(action: argparse.Action) -> str:
    h = action.help if isinstance(action.help, str) and action.help != argparse.SUPPRESS else ""
    return " ".join(h.replace("%(default)s", str(action.default)).replace("%%", "%").split())


def _choices(action: argparse.Action) -> list[str]:
    vals = action.choices if action.choices is not None else getattr(action, "completions", None)
    if vals is None or isinstance(vals, dict):
        return []
    return [str(v) for v in vals if SAFE_WORD.fullmatch(str(v))]


def _files(action: argparse.Action) -> str:
    hint = f"{action.metavar or ''} {action.dest}".upper()
    if "GLOB" in hint:
        return ""
    if "DIR" in hint or "FOLDER" in hint:
        return "d"
    return "f" if any(h in hint for h in FILE_HINTS) or action.dest in ("config", "paths", "file") else ""


def walk(parser: argparse.ArgumentParser, path: str = "", help: str = "") -> Node:
    node = Node(path, parser, help)
    for act in parser._actions:
        if isinstance(act, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in act._choices_actions}
            for name, sub in act.choices.items():
                if SAFE_WORD.fullmatch(name):
                    node.subs[name] = walk(sub, f"{path} {name}".strip(), str(helps.get(name, "")))
        elif act.option_strings:
            if act.help == argparse.SUPPRESS:
                continue
            flags = [f for f in act.option_strings if SAFE_WORD.fullmatch(f)]
            node.options.append(Opt(flags, act.nargs != 0, _choices(act), _files(act) if act.nargs != 0 else "",
                                    _help(act), str(act.metavar or act.dest.upper())))
        else:
            ch = _choices(act)
            node.words += ch
            node.positional_files = node.positional_files or (not ch and bool(_files(act) or act.nargs in ("*", "+")))
    return node


def nodes(root: Node) -> list[Node]:
    out = [root]
    for sub in root.subs.values():
        out += nodes(sub)
    return out


def _words(n: Node) -> list[str]:
    return [f for o in n.options for f in o.flags] + list(n.subs) + n.words


def _fname(prog: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", prog)


# --------------------------------------------------------------------------- bash
def bash(root: Node, prog: str) -> str:
    fn = f"_{_fname(prog)}_complete"
    out = [f"# bash completion for {prog}, generated from its parser: {prog} completion bash",
           f"# use: source <({prog} completion bash), or save it as",
           f"# ~/.local/share/bash-completion/completions/{prog}",
           f"{fn}() {{",
           "    local cur prev cmdpath w i words files",
           "    COMPREPLY=()",
           '    cur="${COMP_WORDS[COMP_CWORD]}"',
           '    prev="${COMP_WORDS[COMP_CWORD-1]}"',
           '    cmdpath=""',
           "    for ((i = 1; i < COMP_CWORD; i++)); do",
           '        w="${COMP_WORDS[i]}"',
           '        case "$cmdpath/$w" in']
    for n in nodes(root):
        for name, sub in n.subs.items():
            out.append(f'            "{n.path}/{name}") cmdpath="{sub.path}" ;;')
    out += ["        esac", "    done", '    case "$cmdpath/$prev" in']
    for n in nodes(root):
        for o in n.options:
            if not o.takes_value or not o.flags:
                continue
            pats = "|".join(f'"{n.path}/{f}"' for f in o.flags)
            if o.choices:
                act = f'COMPREPLY=( $(compgen -W "{" ".join(o.choices)}" -- "$cur") )'
            elif o.files:
                act = f'COMPREPLY=( $(compgen -{o.files} -- "$cur") )'
            else:
                act = ":"  # a value nothing can guess (a number, a name)
            out.append(f"        {pats}) {act}; return 0 ;;")
    out += ["    esac", "    files=0", '    case "$cmdpath" in']
    for n in nodes(root):
        out.append(f'        "{n.path}") words="{" ".join(_words(n))}"'
                   + ("; files=1" if n.positional_files and not n.subs else "") + " ;;")
    out += ["    esac",
            '    COMPREPLY=( $(compgen -W "$words" -- "$cur") )',
            '    if [[ $files == 1 && "$cur" != -* ]]; then',
            '        COMPREPLY+=( $(compgen -f -- "$cur") )',
            "    fi",
            "    return 0",
            "}",
            f"complete -o filenames -F {fn} {prog}", ""]
    return "\n".join(out)


# --------------------------------------------------------------------------- zsh
def zsh(root: Node, prog: str) -> str:
    fn = f"_{_fname(prog)}"
    out = [f"#compdef {prog}",
           f"# zsh completion for {prog}, generated from its parser: {prog} completion zsh",
           f"# use: source <({prog} completion zsh) after compinit, or save it as _{prog} in your $fpath",
           f"{fn}() {{",
           '    local cmdpath="" w i cur="${words[CURRENT]}" prev="${words[CURRENT-1]}"',
           "    for ((i = 2; i < CURRENT; i++)); do",
           '        w="${words[i]}"',
           '        case "$cmdpath/$w" in']
    for n in nodes(root):
        for name, sub in n.subs.items():
            out.append(f'            "{n.path}/{name}") cmdpath="{sub.path}" ;;')
    out += ["        esac", "    done", '    case "$cmdpath/$prev" in']
    for n in nodes(root):
        for o in n.options:
            if not o.takes_value or not o.flags:
                continue
            pats = "|".join(f'"{n.path}/{f}"' for f in o.flags)
            act = (f"compadd -- {' '.join(o.choices)}" if o.choices else
                   "_files -/" if o.files == "d" else "_files" if o.files else ":")
            out.append(f"        {pats}) {act}; return ;;")
    out += ["    esac", '    case "$cmdpath" in']
    for n in nodes(root):
        files = '; [[ $cur == -* ]] || _files' if n.positional_files and not n.subs else ""
        out.append(f'        "{n.path}") compadd -- {" ".join(_words(n))}{files} ;;')
    out += ["    esac",
            "}",
            "if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then",
            f'    {fn} "$@"',
            "else",
            f"    compdef {fn} {prog}",
            "fi", ""]
    return "\n".join(out)


# --------------------------------------------------------------------------- fish
def _fq(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish(root: Node, prog: str) -> str:
    fn = f"__fish_{_fname(prog)}"
    out = [f"# fish completion for {prog}, generated from its parser: {prog} completion fish",
           f"# use: {prog} completion fish > ~/.config/fish/completions/{prog}.fish",
           f"function {fn}_path",
           "    set -l cmdpath ROOT",
           "    set -l args (commandline -opc)",
           "    set -e args[1]",
           "    for w in $args",
           '        switch "$cmdpath/$w"']
    for n in nodes(root):
        for name, sub in n.subs.items():
            out += [f"            case {_fq((n.path or 'ROOT') + '/' + name)}",
                    f"                set cmdpath {_fq(sub.path)}"]
    out += ["        end", "    end", "    echo $cmdpath", "end",
            f"function {fn}_at", f'    test ({fn}_path) = "$argv"', "end",
            f"complete -c {prog} -e"]
    for n in nodes(root):
        where = n.path or "ROOT"
        cond = f"-n {_fq(f'{fn}_at {where}')}"
        for name, sub in n.subs.items():
            out.append(f"complete -c {prog} {cond} -f -a {name} -d {_fq(sub.help[:90])}")
        for o in n.options:
            flags = " ".join(f"-l {f[2:]}" if f.startswith("--") else f"-s {f[1:]}" for f in o.flags
                             if f.startswith("--") or len(f) == 2)
            if not flags:
                continue
            val = ""
            if o.takes_value:
                val = (f" -x -a {_fq(' '.join(o.choices))}" if o.choices else " -r -F" if o.files else " -x")
            out.append(f"complete -c {prog} {cond} {flags}{val} -d {_fq(o.help[:90])}")
        if n.words:
            out.append(f"complete -c {prog} {cond} -f -a {_fq(' '.join(n.words))}")
    return "\n".join(out) + "\n"


def run_generated(parser: argparse.ArgumentParser, command: str, shell: str | None, as_json: bool, out) -> int:
    """``PROG completion SHELL`` / ``PROG man``, as text or (``--json``) one JSON object."""
    import json

    if command == "man":
        text = man_page(parser)
        out.write(json.dumps({"man": text}) + "\n" if as_json else text)
    else:
        assert shell is not None
        text = script(parser, shell)
        out.write(json.dumps({"shell": shell, "script": text}) + "\n" if as_json else text)
    return 0


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    prog = parser.prog
    return {"bash": bash, "zsh": zsh, "fish": fish}[shell](walk(parser), prog)


# --------------------------------------------------------------------------- man page
def _roff(text: str) -> str:
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + line) if line.startswith((".", "'")) else line for line in text.split("\n"))


def _usage(parser: argparse.ArgumentParser) -> str:
    f = argparse.HelpFormatter(parser.prog, width=72)
    f.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return f.format_help().strip()


def _option_lines(n: Node) -> list[str]:
    out = []
    for o in n.options:
        if not o.flags:
            continue
        head = ", ".join(f"\\fB{_roff(f)}\\fR" + (f" \\fI{_roff(o.metavar)}\\fR" if o.takes_value else "")
                         for f in o.flags)
        out += [".TP", head, _roff(o.help + (f" (one of: {', '.join(o.choices)})" if o.choices else ""))
                if o.help or o.choices else "\\&"]
    return out


def man_page(parser: argparse.ArgumentParser, today: date | None = None) -> str:
    from ragweedd import __version__

    root = walk(parser)
    prog = parser.prog
    day = (today or date.today()).isoformat()
    out = [f'.TH {prog.upper()} 1 "{day}" "{prog} {__version__}" "User Commands"',
           ".SH NAME", f"{prog} \\- {_roff(parser.description or '')}",
           ".SH SYNOPSIS", ".nf", _roff(_usage(parser)), ".fi",
           ".SH DESCRIPTION", _roff(parser.description or ""),
           ".SH OPTIONS", *_option_lines(root)]
    if root.subs:
        out.append(".SH COMMANDS")
    for n in nodes(root)[1:]:
        out += [f'.SS "{_roff(prog + " " + n.path)}"', ".nf", _roff(_usage(n.parser)), ".fi", ".PP",
                _roff(n.help or n.parser.description or "")]
        if n.subs:
            out += [".PP", _roff("commands: " + ", ".join(n.subs))]
        out += _option_lines(n)
    if parser.epilog:
        out += ['.SH "EXIT STATUS"', _roff(parser.epilog)]
    other = "ragweedd" if prog == "ragweedctl" else "ragweedctl"
    out += ['.SH "SEE ALSO"', f"\\fB{other}\\fR(1); the documentation in docs/ of the ragweedd sources", ""]
    return "\n".join(out)
