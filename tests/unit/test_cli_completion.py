"""Completion scripts and man pages generated from the real parsers of ragweedctl and ragweedd: the bash
script parses and, sourced in a real bash, completes commands, options and choices; zsh and fish parse
their scripts (when installed); the man pages render without a groff warning and list every
subcommand; and normal ragweedctl start-up does not load the generator."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
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
    return [n for n in act.choices if not n.startswith("_")]  # "_collections" is for the scripts only


def complete(script: Path, prog: str, *words: str, env: dict | None = None) -> list[str]:
    """What bash offers for the command line ``prog words...`` (the last word is being completed).
    ``prog`` is a shell function running the real program, as an installed one would be on PATH."""
    fn = f"_{prog}_complete"
    line = " ".join([prog, *words])
    arr = " ".join(f"'{w}'" for w in [prog, *words])
    runner = f"{prog}() {{ {' '.join(PROGS[prog])} \"$@\"; }}; "
    cmd = (f"{runner}source {script}; COMP_WORDS=({arr}); COMP_CWORD={len(words)}; COMP_LINE='{line}'; "
           f"{fn} {prog} '{words[-1] if words else ''}' '{([prog, *words])[-2]}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
    p = subprocess.run(["bash", "--norc", "--noprofile", "-c", cmd], capture_output=True, text=True, timeout=30,
                       cwd=script.parent, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
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


# --------------------------------------------------------------------------- positions and collection names
def plain(offered: list[str]) -> list[str]:
    return [w for w in offered if not w.startswith("-")]  # an empty word is offered the options too


def test_bash_completes_positionals_by_position(bash_scripts):
    s = bash_scripts["ragweedctl"]
    assert plain(complete(s, "ragweedctl", "keys", "")) == ["set", "list", "remove"]
    # the action typed, the provider comes next: the actions are not offered again
    assert plain(complete(s, "ragweedctl", "keys", "set", "")) == ["anthropic", "openai", "gemini"]
    assert plain(complete(s, "ragweedctl", "--state-dir", "/x", "keys", "remove", "")) == \
        ["anthropic", "openai", "gemini"]
    assert plain(complete(s, "ragweedctl", "service", "install", "")) == []
    d = bash_scripts["ragweedd"]
    assert plain(complete(d, "ragweedd", "--config", "nowhere.toml", "completion", "")) == ["bash", "zsh", "fish"]
    assert "_collections" not in complete(d, "ragweedd", "") + complete(s, "ragweedctl", "")


@pytest.fixture(scope="module")
def ragweedd_config(tmp_path_factory):
    d = tmp_path_factory.mktemp("names")
    (d / "docs").mkdir()
    (d / "docs" / "a.txt").write_text("alpha words\n")
    cfg = d / "c.toml"
    cfg.write_text(f'data_dir = "{d / "data"}"\ncache_dir = "{d / "cache"}"\n'
                   f'[collections.beta]\npaths = ["{d / "docs"}"]\n')
    p = subprocess.run(PROGS["ragweedd"] + ["--config", str(cfg), "ingest", str(d / "docs"), "-c", "alpha"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120,
                       env={**os.environ, "RAGWEED_EMBED_MODEL": "hash:64"})
    assert p.returncode == 0, p.stderr
    return cfg


def test_bash_completes_ragweedd_collection_names_from_the_config(bash_scripts, ragweedd_config):
    s = bash_scripts["ragweedd"]
    cfg = str(ragweedd_config)
    # the config's [collections.beta] and the one-shot ingested 'alpha' of its data dir
    assert plain(complete(s, "ragweedd", "--config", cfg, "search", "x", "-c", "")) == ["alpha", "beta"]
    assert plain(complete(s, "ragweedd", "--config", cfg, "ingest", "--collection", "b")) == ["beta"]
    assert complete(s, "ragweedd", "--config", cfg, "eval", "questions", "q.jsonl", "--collection", "") == \
        ["alpha", "beta"]
    # a broken config: nothing, and no error printed into the command line
    assert plain(complete(s, "ragweedd", "--config", "/nonexistent.toml", "search", "x", "-c", "")) == []


def test_bash_completes_ragweedctl_collection_names_from_the_daemon(bash_scripts, tmp_path):
    from tests.api_support import running_api

    s = bash_scripts["ragweedctl"]
    with running_api(tmp_path / "d") as api:
        st = str(api.state_dir)
        assert plain(complete(s, "ragweedctl", "--state-dir", st, "search", "-c", "")) == ["notes"]
        assert plain(complete(s, "ragweedctl", "--state-dir", st, "remove", "n")) == ["notes"]
        assert plain(complete(s, "ragweedctl", "--state-dir", st, "upload", ""))[:1] == ["notes"]
        assert plain(complete(s, "ragweedctl", "docs", "-c", "", env={"RAGWEED_STATE_DIR": st})) == ["notes"]
        assert "notes" not in complete(s, "ragweedctl", "--state-dir", st, "add", "")  # a new name: no guess
    t0 = time.monotonic()
    assert plain(complete(s, "ragweedctl", "--state-dir", st, "search", "-c", "")) == []  # no daemon: silently nothing
    assert time.monotonic() - t0 < 5


def test_zsh_and_fish_complete_positions_and_collection_names(tmp_path, ragweedd_config):
    cfg = str(ragweedd_config)
    if shutil.which("fish"):
        f = tmp_path / "ragweedctl.fish"
        f.write_text(gen("ragweedctl", "completion", "fish"))
        g = tmp_path / "ragweedd.fish"
        g.write_text(gen("ragweedd", "completion", "fish"))
        run = f"function ragweedd; {' '.join(PROGS['ragweedd'])} $argv; end; "
        p = subprocess.run(["fish", "--no-config", "-c",
                            f"{run}source {f}; source {g}; complete -C 'ragweedctl keys set '; echo ==; "
                            f"complete -C 'ragweedd --config {cfg} search x -c '"],
                           capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert p.returncode == 0 and not p.stderr, p.stderr
        keys, names = p.stdout.split("==\n")
        assert sorted(x.split("\t")[0] for x in keys.splitlines()) == ["anthropic", "gemini", "openai"]
        assert [x.split("\t")[0] for x in names.splitlines()] == ["alpha", "beta"]
    if shutil.which("zsh"):
        z = tmp_path / "ragweedd.zsh"
        z.write_text(gen("ragweedd", "completion", "zsh"))
        # compadd only works inside the completion system: record what would be offered instead
        probe = ("compadd() { [[ $1 == -- ]] && shift; print -r -l -- \"$@\"; }; _files() { :; }; "
                 f"ragweedd() {{ {' '.join(PROGS['ragweedd'])} \"$@\"; }}; compdef() {{ :; }}; "
                 f"source {z}; words=(ragweedd --config {cfg} search x -c ''); CURRENT=7; _ragweedd; print -r -- '=='; "
                 "words=(ragweedd completion ''); CURRENT=3; _ragweedd")
        p = subprocess.run(["zsh", "-f", "-c", probe], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert p.returncode == 0 and not p.stderr, p.stderr
        names, shells = p.stdout.split("==\n")
        assert names.split() == ["alpha", "beta"]
        assert [w for w in shells.split() if not w.startswith("-")] == ["bash", "zsh", "fish"]
