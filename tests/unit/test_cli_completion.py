"""Completion scripts and man pages generated from the real parsers of ragweedctl and ragweedd: the bash
script parses and, sourced in a real bash, completes commands, options and choices; zsh and fish parse
their scripts (when installed); the man pages render without a groff warning and list every
subcommand; and normal ragweedctl start-up does not load the generator."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGS = {"ragweedctl": [sys.executable, "-m", "ragweedd.cli.ctl"], "ragweedd": [sys.executable, "-m", "ragweedd"]}


def gen(prog: str, *argv: str) -> str:
    p = subprocess.run(PROGS[prog] + list(argv), capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


def subcommands(prog: str) -> list[str]:
    if prog == "ragweedctl":
        from ragweedd.cli.ctl import build_parser
    else:
        from ragweedd.cli.command import build_parser
    import argparse

    act = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return list(act.choices)


def complete(script: Path, prog: str, *words: str) -> list[str]:
    """What bash offers for the command line ``prog words...`` (the last word is being completed)."""
    fn = f"_{prog}_complete"
    line = " ".join([prog, *words])
    arr = " ".join(f"'{w}'" for w in [prog, *words])
    cmd = (f"source {script}; COMP_WORDS=({arr}); COMP_CWORD={len(words)}; COMP_LINE='{line}'; "
           f"{fn}; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
    p = subprocess.run(["bash", "--norc", "--noprofile", "-c", cmd], capture_output=True, text=True, timeout=30,
                       cwd=script.parent)
    assert p.returncode == 0 and not p.stderr, p.stderr
    return [x for x in p.stdout.splitlines() if x]


@pytest.fixture(scope="module")
def bash_scripts(tmp_path_factory):
    d = tmp_path_factory.mktemp("completion")
    out = {}
    for prog in PROGS:
        f = d / f"{prog}.bash"
        f.write_text(gen(prog, "completion", "bash"))
        out[prog] = f
    return out


@pytest.mark.parametrize("prog", list(PROGS))
def test_bash_script_is_valid(bash_scripts, prog):
    p = subprocess.run(["bash", "-n", str(bash_scripts[prog])], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr


def test_bash_completes_ragweedctl(bash_scripts):
    s = bash_scripts["ragweedctl"]
    assert complete(s, "ragweedctl", "st") == ["status"]
    assert set(complete(s, "ragweedctl", "")) >= set(subcommands("ragweedctl"))
    assert complete(s, "ragweedctl", "status", "--wa") == ["--watch"]
    assert complete(s, "ragweedctl", "docs", "--state", "ind") == ["indexed"]
    assert complete(s, "ragweedctl", "service", "un") == ["uninstall"]
    assert complete(s, "ragweedctl", "keys", "set", "an") == ["anthropic"]
    assert {"bash", "zsh", "fish"} <= set(complete(s, "ragweedctl", "completion", ""))
    assert complete(s, "ragweedctl", "completion", "z") == ["zsh"]
    assert complete(s, "ragweedctl", "--json", "hist") == ["history"]  # an option before the command


def test_bash_completes_ragweedd_and_its_nested_commands(bash_scripts):
    s = bash_scripts["ragweedd"]
    assert complete(s, "ragweedd", "che") == ["check-config"]
    assert complete(s, "ragweedd", "eval", "b") == ["beir"]
    assert "--fusion" in complete(s, "ragweedd", "eval", "beir", "--fu")
    assert complete(s, "ragweedd", "search", "x", "--mode", "k") == ["keyword"]
    assert complete(s, "ragweedd", "ingest", "--js") == ["--json"]
    (s.parent / "notes-folder").mkdir(exist_ok=True)
    assert "notes-folder" in complete(s, "ragweedd", "ingest", "notes-f")  # paths: the files


@pytest.mark.parametrize("prog", list(PROGS))
@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_parse(tmp_path, prog, shell):
    if not shutil.which(shell):
        pytest.skip(f"{shell} is not installed (.ci/run installs it)")
    f = tmp_path / f"{prog}.{shell}"
    f.write_text(gen(prog, "completion", shell))
    p = subprocess.run([shell, "-n", str(f)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and not p.stderr, p.stderr
    text = f.read_text()
    for sub in subcommands(prog):
        assert sub in text


def test_fish_completes_a_subcommand(tmp_path):
    if not shutil.which("fish"):
        pytest.skip("fish is not installed (.ci/run installs it)")
    f = tmp_path / "ragweedctl.fish"
    f.write_text(gen("ragweedctl", "completion", "fish"))
    p = subprocess.run(["fish", "--no-config", "-c", f"source {f}; complete -C 'ragweedctl st'"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert [x.split("\t")[0] for x in p.stdout.splitlines()] == ["status"]


def test_zsh_registers_its_function(tmp_path):
    if not shutil.which("zsh"):
        pytest.skip("zsh is not installed (.ci/run installs it)")
    f = tmp_path / "ragweedctl.zsh"
    f.write_text(gen("ragweedctl", "completion", "zsh"))
    p = subprocess.run(["zsh", "-f", "-c", f"autoload -U compinit && compinit -u -D && source {f} && "
                                           "print -r -- ${_comps[ragweedctl]}"],
                       capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "_ragweedctl"


@pytest.mark.parametrize("prog", list(PROGS))
def test_man_page_renders_without_warnings_and_lists_every_subcommand(tmp_path, prog):
    if not shutil.which("groff"):
        pytest.skip("groff is not installed")
    page = gen(prog, "man")
    assert page.startswith(f".TH {prog.upper()} 1 ")
    f = tmp_path / f"{prog}.1"
    f.write_text(page)
    p = subprocess.run(["groff", "-man", "-Tutf8", "-ww", str(f)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and not p.stderr, p.stderr
    rendered = p.stdout
    for sub in subcommands(prog):
        assert f"{prog} {sub}" in rendered, sub
    assert "--json" in rendered.replace("‐", "-")


def test_completion_and_man_take_json():
    doc = json.loads(gen("ragweedctl", "--json", "completion", "bash"))
    assert doc["shell"] == "bash" and "complete -o filenames -F _ragweedctl_complete ragweedctl" in doc["script"]
    doc = json.loads(gen("ragweedd", "man", "--json"))
    assert doc["man"].startswith(".TH RAGWEEDD 1 ")


def test_ragweedctl_start_up_loads_no_generator_and_no_keys_machinery():
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "ragweedd.cli.ctl", "--version"],
                       capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert p.returncode == 0, p.stderr
    imported = {line.split("|")[-1].strip() for line in p.stderr.splitlines() if line.startswith("import time:")}
    assert "argparse" in imported
    assert not imported & {"ragweedd.cli.completion", "ragweedd.cli.watch", "ragweedd.cli.progress", "tomllib",
                           "getpass", "dataclasses", "datetime", "ragweedd.paths"}, imported
