"""The README shows `ragweedctl --help` between markers; keep it equal to the real output."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
START, END = "<!-- ragweedctl-help:start -->", "<!-- ragweedctl-help:end -->"


def readme_block(text: str) -> str:
    assert START in text and END in text, "README.md lost its ragweedctl-help markers"
    block = text[text.index(START) + len(START): text.index(END)]
    m = re.fullmatch(r"\s*```[a-z]*\n(.*?)\n```\s*", block, re.S)
    assert m, "the marked block must hold one fenced code block"
    return m.group(1)


def test_readme_help_matches_ragweedctl_help():
    # Run the real program (fixed-width formatter, so the terminal size does not matter).
    p = subprocess.run([sys.executable, "-m", "ragweedd.cli.ctl", "--help"], capture_output=True, text=True,
                       cwd=ROOT, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"}, timeout=30)
    assert p.returncode == 0
    actual = p.stdout.rstrip("\n")
    documented = readme_block((ROOT / "README.md").read_text(encoding="utf-8"))
    assert documented == actual, (
        "README.md's ragweedctl --help block is out of date; paste the output of "
        "`ragweedctl --help` between the markers")


def test_block_parser_detects_drift():
    stale = f"x\n{START}\n```text\nusage: old\n```\n{END}\n"
    assert readme_block(stale) == "usage: old"
    try:
        readme_block("no markers here")
    except AssertionError:
        return
    raise AssertionError("missing markers must fail")
