"""editors/emacs/ragweed.el in Debian's emacs-nox, batch mode, against a real daemon: the ERT tests
of tests/system/emacs/ragweed-test.el, each in its own Emacs (`emacs -Q --batch`, the package loaded
from its folder as its installation line does). The daemon's state directory is in
RAGWEED_STATE_DIR, as in a user's session; what the daemon's API answers for the same searches is
handed to the ERT tests as a JSON file, with the paths the error tests use.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from tests.system.conftest import ROOT
from tests.system.editor_support import (
    LIMIT,
    NOWHERE,
    TEA,
    Tools,
    bad_token_state,
    editor_daemon,
    not_running_state,
    target,
)
from tests.tools import require_tool

PACKAGE = ROOT / "editors" / "emacs"
ERT = ROOT / "tests" / "system" / "emacs" / "ragweed-test.el"
TESTS = ["ragweed-test-search-completing-read", "ragweed-test-search-xref", "ragweed-test-ask",
         "ragweed-test-errors", "ragweed-test-state-dir-setting-wins"]


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    require_tool("emacs")  # before the daemon starts: nothing to start it for
    with editor_daemon(tmp_path_factory.mktemp("emacs")) as dm:
        yield dm


def expectations(d, tools: Tools, tmp) -> dict:
    docs = d.base.parent / "docs"
    cats = d.search("cat number 27", top_k=LIMIT)
    deepest = max(range(len(cats)), key=lambda i: (cats[i]["lines"] or [0])[0])
    first, last = cats[deepest]["lines"]
    assert first > 1
    pdf = d.search("lighthouse keeper lantern", top_k=LIMIT)
    page2 = next(i for i, h in enumerate(pdf) if target(h["uri"]).get("page") == 2)
    return {
        "cats_hits": [target(h["uri"]) for h in cats], "deepest": deepest,
        "deepest_place": f"notes/cats.md  § Cats, lines {first}-{last}  ",
        "pdf_hits": [target(h["uri"]) for h in pdf], "page2": page2,
        "tea_hits": [target(h["uri"]) for h in d.search("green tea", top_k=LIMIT)],
        "tea_line": next(n for n, x in enumerate(TEA.splitlines(), 1) if x.startswith("Green tea")),
        "docs": str(docs), "records": str(tools.records), "port": d.port,
        "not_running": str(not_running_state(tmp)), "bad": str(bad_token_state(d, tmp)),
        "missing": str(tmp / "nowhere" / "ragweedctl"), "nowhere": NOWHERE,
    }


def test_the_ert_file_holds_these_tests():
    assert sorted(re.findall(r"^\(ert-deftest (\S+)", ERT.read_text(), re.M)) == sorted(TESTS)


@pytest.mark.parametrize("name", TESTS)
def test_ert(d, tmp_path, name):
    exe = require_tool("emacs")
    tools = Tools(tmp_path)
    tools.pdf_app("org.pwmt.zathura.desktop")
    expect = tmp_path / "expect.json"
    expect.write_text(json.dumps(expectations(d, tools, tmp_path)))
    env = tools.env(d.base / "state", RAGWEED_TEST_EXPECT=str(expect), HOME=str(tmp_path))
    r = subprocess.run([exe, "-Q", "--batch", "-L", str(PACKAGE), "-l", "ragweed", "-l", str(ERT),
                        "--eval", f"(ert-run-tests-batch-and-exit '{name})"],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "Ran 1 tests, 1 results as expected" in out, out
    assert "Debugger entered" not in out and "error in process sentinel" not in out, out
