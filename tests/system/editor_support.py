"""What the editor and launcher tests share: a real daemon over a few real documents (a markdown file
of numbered lines, a text file, a two-page PDF), and a folder of programs
put first on PATH for the editor under test:

- ``ragweedctl``: this checkout's ragweedctl (the editors find it on PATH, as a user's would);
- ``xdg-open``, ``zathura``, ``edit``: record their arguments (one JSON list per call) instead of
  opening anything, so a test can see what was opened where;
- ``xdg-mime``: answers ``query default application/pdf`` with what ``Tools.pdf_app`` sets (the
  desktop's PDF viewer), nothing by default.

Nothing here reads the daemon's token or port for the editors: they find them through ragweedctl
(RAGWEED_STATE_DIR in their environment, or their own state-dir setting).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tests.system.conftest import ROOT, Daemon, serving, wait_indexed
from tests.tools import wait_until

CATS = "# Cats\n\n" + "".join(f"Line {n} about cats: cat number {n} purrs when content.\n" for n in range(1, 41))
TEA = "Kitchen notes.\n\nGreen tea should steep for two minutes at eighty degrees Celsius, never boiling water.\n"
# long enough pages that one passage lies on page 2 alone: opening it must reach page 2
PDF_PAGES = [" ".join(f"Bicycle gears number {i} turn the chain wheel smoothly on the road." for i in range(12)),
             " ".join(f"The lighthouse keeper fills the lantern with oil at dusk, entry {i} of the log."
                      for i in range(12))]
LIMIT = 20  # what every face under test asks for (the editors' and the launcher's default)
NOWHERE = "*/no-such-folder/*"  # a path filter no document matches: a search without results


def write_docs(base: Path) -> Path:
    from fpdf import FPDF

    docs = base / "docs"
    docs.mkdir(parents=True)
    (docs / "cats.md").write_text(CATS)
    (docs / "tea.txt").write_text(TEA)
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for text in PDF_PAGES:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    pdf.output(str(docs / "keeper.pdf"))
    return docs


@contextmanager
def editor_daemon(base: Path) -> Iterator[Daemon]:
    docs = write_docs(base)
    with serving(Daemon(base / "d", {"notes": [docs]}, extra="chunk_size = 64")) as d:
        wait_indexed(d, "notes", 3)
        d.wait_idle()
        yield d


def target(uri: str) -> dict:
    """What a uri points at, read the way docs/api.md defines it (independently of the code tested)."""
    from urllib.parse import unquote, urlsplit

    u = urlsplit(uri)
    out: dict = {"path": unquote(u.path)}
    if u.fragment.startswith("L"):
        out["line"] = int(u.fragment[1:].split("-")[0])
    if u.fragment.startswith("page="):
        out["page"] = int(u.fragment[5:])
    return out


class Tools:
    """The programs folder put first on PATH (see the module docstring)."""

    RECORDED = ("xdg-open", "zathura", "edit")

    def __init__(self, base: Path) -> None:
        self.bin = base / "bin"
        self.records = base / "records"
        self.bin.mkdir(parents=True)
        self.records.mkdir()
        self._write("ragweedctl", f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -m ragweedd.cli.ctl "$@"\n')
        recorder = (f"#!{sys.executable}\nimport json, os, sys\n"
                    f"log = os.path.join({str(self.records)!r}, os.path.basename(sys.argv[0]) + '.jsonl')\n"
                    "with open(log, 'a') as f:\n"
                    "    f.write(json.dumps(sys.argv[1:]) + '\\n')\n")
        for name in self.RECORDED:
            self._write(name, recorder)
        self._write("xdg-mime", f'#!/bin/sh\n[ "$*" = "query default application/pdf" ] && '
                                f'cat "{self.bin / "pdf-app"}" 2>/dev/null\nexit 0\n')

    def _write(self, name: str, text: str) -> None:
        p = self.bin / name
        p.write_text(text)
        p.chmod(0o755)

    def pdf_app(self, desktop_file: str | None) -> None:
        """The desktop's PDF viewer as xdg-mime names it, e.g. "org.pwmt.zathura.desktop"."""
        p = self.bin / "pdf-app"
        if desktop_file is None:
            p.unlink(missing_ok=True)
        else:
            p.write_text(desktop_file + "\n")

    def env(self, state_dir: Path | None = None, **extra: str) -> dict:
        """The editor's environment: these programs first on PATH; RAGWEED_STATE_DIR only when given
        (otherwise none, so nothing finds a daemon by accident)."""
        env = {k: v for k, v in os.environ.items() if k not in ("RAGWEED_STATE_DIR", "VISUAL", "EDITOR")}
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        if state_dir is not None:
            env["RAGWEED_STATE_DIR"] = str(state_dir)
        env.update(extra)
        return env

    def calls(self, name: str) -> list[list[str]]:
        p = self.records / f"{name}.jsonl"
        return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []

    def wait_call(self, name: str, n: int = 1) -> list[str]:
        """The n-th call of a recorded program (they run detached, so after the editor may exit)."""
        return wait_until(lambda: len(self.calls(name)) >= n and self.calls(name)[n - 1], 30, 0.05,
                          f"call {n} of {name}")

    def clear(self) -> None:
        for p in self.records.iterdir():
            p.unlink()


def not_running_state(base: Path) -> Path:
    """A state directory without a daemon: no port file, as after a clean stop."""
    p = base / "no-daemon-state"
    p.mkdir(exist_ok=True)
    return p


def bad_token_state(d: Daemon, base: Path) -> Path:
    """The running daemon's port file next to a token that is not its own."""
    p = base / "bad-token-state"
    p.mkdir(exist_ok=True)
    shutil.copy(d.base / "state" / "port", p / "port")
    (p / "token").write_text("not-the-daemons-token\n")
    (p / "token").chmod(0o600)
    return p
