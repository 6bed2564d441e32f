"""Shell completion scripts (bash, zsh, fish) and a roff man page, generated from argparse parsers.

Both ``ragweedctl`` and ``ragweedd`` print them (``completion SHELL``, ``man``) from their own
``build_parser()``, so a new subcommand or option is completed and documented with no second list
to keep. The parsers are walked once into ``Node``s: per command path (``""``, ``"status"``,
``"eval beir"``) its options (with the values they take), its positional choices and its
subcommands. Only names made of safe characters get into a script; help text is quoted.

Positionals are completed by position (``keys set <TAB>`` offers providers, not ``set`` again).
An argument marked ``completer = "collections"`` (``-c``, ``remove NAME``...) is completed with
collection names, asked at TAB time from the program's hidden ``_collections`` command (ragweedctl:
the running daemon, with a short timeout; ragweedd: the config and the data dir), which prints
nothing when it has nothing to say. ``--config`` and ``--state-dir`` already on the line are passed
to it. Commands whose name starts with ``_`` are hidden: not completed, not in the man page.

Imported only by those two commands: normal start-up never pays for it.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from datetime import date
from typing import TextIO

from ragweedd import __version__

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
    dynamic: str = ""  # "collections": names asked from the program at TAB time


@dataclass
class Pos:
    choices: list[str]
    dynamic: str  # as Opt.dynamic
    repeats: bool  # nargs "*" / "+": every later word is this one too


@dataclass
class Node:
    path: str  # "" for the program itself, else the subcommand words joined by spaces
    parser: argparse.ArgumentParser
    help: str = ""
    options: list[Opt] = field(default_factory=list)
    words: list[str] = field(default_factory=list)  # positional choices (all positions)
    pos: list[Pos] = field(default_factory=list)  # the positionals, in order
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


def _dynamic(action: argparse.Action) -> str:
    return "collections" if getattr(action, "completer", None) == "collections" else ""


CONTEXT_FLAGS = ("--config", "--state-dir")  # passed on to `PROG _collections` when on the line


def _context_flags(root: Node) -> list[str]:
    return [f for f in CONTEXT_FLAGS if any(f in o.flags for o in root.options)]


def _by_position(n: Node) -> list[tuple[str, list[str], str]]:
    """(bash/zsh case pattern of the positional index, choices, dynamic) per position; index 0 also
    offers the subcommands."""
    out = []
    for i, p in enumerate(n.pos):
        words = (list(n.subs) if i == 0 else []) + p.choices
        out.append((f"{i}" if not p.repeats else f"{i}|[{i + 1}-9]|[1-9][0-9]", words, p.dynamic))
    if not n.pos and n.subs:
        out.append(("0", list(n.subs), ""))
    return out


def walk(parser: argparse.ArgumentParser, path: str = "", help: str = "") -> Node:
    node = Node(path, parser, help)
    for act in parser._actions:
        if isinstance(act, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in act._choices_actions}
            for name, sub in act.choices.items():
                if SAFE_WORD.fullmatch(name) and not name.startswith("_"):
                    node.subs[name] = walk(sub, f"{path} {name}".strip(), str(helps.get(name, "")))
        elif act.option_strings:
            if act.help == argparse.SUPPRESS:
                continue
            flags = [f for f in act.option_strings if SAFE_WORD.fullmatch(f)]
            node.options.append(Opt(flags, act.nargs != 0, _choices(act), _files(act) if act.nargs != 0 else "",
                                    _help(act), str(act.metavar or act.dest.upper()), _dynamic(act)))
        else:
            ch = _choices(act)
            node.words += ch
            node.pos.append(Pos(ch, _dynamic(act), act.nargs in ("*", "+")))
            node.positional_files = node.positional_files or (not ch and bool(_files(act) or act.nargs in ("*", "+")))
    return node


def nodes(root: Node) -> list[Node]:
    out = [root]
    for sub in root.subs.values():
        out += nodes(sub)
    return out


def _words(n: Node) -> list[str]:
    return [f for o in n.options for f in o.flags] + list(n.subs) + n.words


def _flags(n: Node) -> list[str]:
    return [f for o in n.options for f in o.flags]


def _value_flags(root: Node) -> list[tuple[str, str]]:
    """(command path, flag) of every option that takes a value: its value is not a positional."""
    return [(n.path, f) for n in nodes(root) for o in n.options if o.takes_value for f in o.flags]


def _fname(prog: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", prog)


# --------------------------------------------------------------------------- bash
def bash(root: Node, prog: str) -> str:
    fn = f"_{_fname(prog)}_complete"
    out = [f"# bash completion for {prog}, generated from its parser: {prog} completion bash",
           f"# use: source <({prog} completion bash), or save it as",
           f"# ~/.local/share/bash-completion/completions/{prog}",
           f"{fn}() {{",
           "    local cur prev cmdpath w i words files npos skip dyn",
           "    local -a ctx=()",
           "    COMPREPLY=()",
           '    cur="${COMP_WORDS[COMP_CWORD]}"',
           '    prev="${COMP_WORDS[COMP_CWORD-1]}"',
           '    cmdpath=""; npos=0; skip=0',
           "    for ((i = 1; i < COMP_CWORD; i++)); do",
           '        w="${COMP_WORDS[i]}"',
           "        if ((skip)); then skip=0; continue; fi",
           '        case "$cmdpath/$w" in']
    out += _walk_words(root, "COMP_WORDS")
    for n in nodes(root):
        for o in n.options:
            if not o.takes_value or not o.flags:
                continue
            pats = "|".join(f'"{n.path}/{f}"' for f in o.flags)
            if o.choices:
                act = f'COMPREPLY=( $(compgen -W "{" ".join(o.choices)}" -- "$cur") )'
            elif o.dynamic:
                act = f'COMPREPLY=( $(compgen -W "$("$1" "${{ctx[@]}}" _{o.dynamic} 2>/dev/null)" -- "$cur") )'
            elif o.files:
                act = f'COMPREPLY=( $(compgen -{o.files} -- "$cur") )'
            else:
                act = ":"  # a value nothing can guess (a number, a name)
            out.append(f"        {pats}) {act}; return 0 ;;")
    out += ["    esac", "    files=0; dyn=\"\"", '    case "$cmdpath" in']
    for n in nodes(root):
        cases = "".join(f' {pat}) words+=" {" ".join(w)}"' + (f"; dyn={d}" if d else "") + " ;;"
                        for pat, w, d in _by_position(n))
        out.append(f'        "{n.path}") words="{" ".join(_flags(n))}"'
                   + ("; files=1" if n.positional_files and not n.subs else "")
                   + (f"; case $npos in{cases} esac" if cases else "") + " ;;")
    out += ["    esac",
            '    if [[ -n $dyn && "$cur" != -* ]]; then',
            '        words+=" $("$1" "${ctx[@]}" _$dyn 2>/dev/null)"',
            "    fi",
            '    COMPREPLY=( $(compgen -W "$words" -- "$cur") )',
            '    if [[ $files == 1 && "$cur" != -* ]]; then',
            '        COMPREPLY+=( $(compgen -f -- "$cur") )',
            "    fi",
            "    return 0",
            "}",
            f"complete -o filenames -F {fn} {prog}", ""]
    return "\n".join(out)



def _walk_words(root: Node, words: str) -> list[str]:
    """The body of the loop over the words typed so far (bash and zsh alike): which subcommand
    they lead to, the options whose value the hidden commands need (``ctx``), the option values to
    skip, and the count of positional words; then the start of the case on the previous word."""
    out = []
    for n in nodes(root):
        for name, sub in n.subs.items():
            out.append(f'            "{n.path}/{name}") cmdpath="{sub.path}"; npos=0; continue ;;')
    out.append("        esac")
    ctx_flags = _context_flags(root)
    if ctx_flags:
        out += ['        case "$w" in',
                f'            {"|".join(ctx_flags)}) ctx+=("$w" "${{{words}[i+1]}}") ;;',
                "        esac"]
    vf = _value_flags(root)
    if vf:
        out += ['        case "$cmdpath/$w" in',
                "            " + "|".join(f'"{p}/{f}"' for p, f in vf) + ") skip=1; continue ;;",
                "        esac"]
    return out + ['        [[ $w == -* ]] || ((npos++))', "    done", '    case "$cmdpath/$prev" in']

# --------------------------------------------------------------------------- zsh
def zsh(root: Node, prog: str) -> str:
    fn = f"_{_fname(prog)}"
    dyn = '${(f)"$(${words[1]} "${ctx[@]}" _collections 2>/dev/null)"}'
    out = [f"#compdef {prog}",
           f"# zsh completion for {prog}, generated from its parser: {prog} completion zsh",
           f"# use: source <({prog} completion zsh) after compinit, or save it as _{prog} in your $fpath",
           f"{fn}() {{",
           '    local cmdpath="" w i cur="${words[CURRENT]}" prev="${words[CURRENT-1]}" npos=0 skip=0',
           "    local -a ctx",
           "    for ((i = 2; i < CURRENT; i++)); do",
           '        w="${words[i]}"',
           "        if ((skip)); then skip=0; continue; fi",
           '        case "$cmdpath/$w" in']
    out += _walk_words(root, "words")
    for n in nodes(root):
        for o in n.options:
            if not o.takes_value or not o.flags:
                continue
            pats = "|".join(f'"{n.path}/{f}"' for f in o.flags)
            act = (f"compadd -- {' '.join(o.choices)}" if o.choices else f"compadd -- {dyn}" if o.dynamic else
                   "_files -/" if o.files == "d" else "_files" if o.files else ":")
            out.append(f"        {pats}) {act}; return ;;")
    out += ["    esac", '    case "$cmdpath" in']
    for n in nodes(root):
        files = '; [[ $cur == -* ]] || _files' if n.positional_files and not n.subs else ""
        cases = "".join(f" {pat}) compadd -- {' '.join(w)}" + (f"; compadd -- {dyn}" if d else "") + " ;;"
                        for pat, w, d in _by_position(n) if w or d)
        out.append(f'        "{n.path}") compadd -- {" ".join(_flags(n))}'
                   + (f"; case $npos in{cases} esac" if cases else "") + f"{files} ;;")
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
    ctx_flags = _context_flags(root)
    vf = _value_flags(root)
    out = [f"# fish completion for {prog}, generated from its parser: {prog} completion fish",
           f"# use: {prog} completion fish > ~/.config/fish/completions/{prog}.fish",
           f"function {fn}_state",
           "    # the command path, then how many positional words follow it, then --config/--state-dir",
           "    set -l cmdpath ROOT",
           "    set -l npos 0",
           "    set -l skip 0",
           "    set -l ctx",
           "    set -l args (commandline -opc)",
           "    set -e args[1]",
           "    for i in (seq (count $args))",
           "        set -l w $args[$i]",
           "        if test $skip = 1",
           "            set skip 0",
           "            continue",
           "        end",
           '        switch "$cmdpath/$w"']
    for n in nodes(root):
        for name, sub in n.subs.items():
            out += [f"            case {_fq((n.path or 'ROOT') + '/' + name)}",
                    f"                set cmdpath {_fq(sub.path)}",
                    "                set npos 0",
                    "                continue"]
    out.append("        end")
    if ctx_flags:
        out += ['        switch "$w"', f"            case {' '.join(ctx_flags)}",
                "                set -a ctx $w $args[(math $i + 1)]", "        end"]
    if vf:
        out += ['        switch "$cmdpath/$w"',
                "            case " + " ".join(_fq((p or "ROOT") + "/" + f) for p, f in vf),
                "                set skip 1", "                continue", "        end"]
    out += ["        string match -q -- '-*' $w; or set npos (math $npos + 1)",
            "    end", "    echo $cmdpath", "    echo $npos", "    printf '%s\\n' $ctx", "end",
            f"function {fn}_at", f'    test ({fn}_state)[1] = "$argv"', "end",
            f"function {fn}_atpos",
            f"    set -l st ({fn}_state)",
            '    test "$st[1]" = "$argv[1]"; or return 1',
            '    test "$st[2]" -eq "$argv[2]"; and return 0',
            '    test "$argv[3]" = more; and test "$st[2]" -gt "$argv[2]"',
            "end",
            f"function {fn}_collections",
            f"    set -l st ({fn}_state)",
            f"    {prog} $st[3..-1] _collections 2>/dev/null",
            "end",
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
                val = (f" -x -a {_fq(' '.join(o.choices))}" if o.choices else
                       f" -x -a {_fq(f'({fn}_collections)')}" if o.dynamic else " -r -F" if o.files else " -x")
            out.append(f"complete -c {prog} {cond} {flags}{val} -d {_fq(o.help[:90])}")
        for i, p in enumerate(n.pos):
            pcond = f"-n {_fq(f'{fn}_atpos {where} {i}' + (' more' if p.repeats else ''))}"
            if p.choices:
                out.append(f"complete -c {prog} {pcond} -f -a {_fq(' '.join(p.choices))}")
            if p.dynamic:
                out.append(f"complete -c {prog} {pcond} -f -a {_fq(f'({fn}_collections)')}")
    return "\n".join(out) + "\n"


def run_generated(parser: argparse.ArgumentParser, command: str, shell: str | None, as_json: bool, out: TextIO) -> int:
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
