"""editors/launcher/ragweed-launch against a real daemon: its rows through fzf's --filter (the
non-interactive fzf: the same matcher, the matches printed instead of shown), the `pick` mode
running fzf itself, rofi's script-mode protocol as rofi drives it (the script's side of it: rofi
itself needs a display), opening a hit at its place, and its errors as one line."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.system.conftest import ROOT
from tests.system.editor_support import LIMIT, NOWHERE, Tools, bad_token_state, editor_daemon, not_running_state, target
from tests.tools import require_tool

SCRIPT = ROOT / "editors" / "launcher" / "ragweed-launch"


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    with editor_daemon(tmp_path_factory.mktemp("launcher")) as dm:
        yield dm


@pytest.fixture
def tools(tmp_path):
    return Tools(tmp_path)


def state(d) -> Path:
    return d.base / "state"


def launch(args: list[str], env: dict, stdin: str | None = None) -> subprocess.CompletedProcess:
    # run as a user runs it: the file itself, through its #! line
    return subprocess.run([str(SCRIPT), *args], env=env, input=stdin, capture_output=True, text=True, timeout=120)


def editor(tools: Tools) -> list[str]:
    return ["--editor", f"{tools.bin / 'edit'} {{path}} {{line}}"]


def test_list_through_fzf_filter_then_open_goes_to_the_line(d, tools):
    require_tool("fzf")
    want = [target(h["uri"]) for h in d.search("cat number 27", top_k=LIMIT)]
    env = tools.env(state(d))
    listed = launch(["list", "cat number 27"], env)
    assert listed.returncode == 0, listed.stderr
    rows = listed.stdout.splitlines()
    # one row per hit, best first, numbered, ending in the uri of its place
    assert [target(r.rsplit("\t", 1)[1]) for r in rows] == want
    assert all(r.startswith(f"[{n}] ") for n, r in enumerate(rows, 1))
    # the person types the file and the lines of one hit in fzf; the rows are matched on their text,
    # not on the uri (--with-nth)
    first, last = deepest_lines(d, "cat number 27")
    fzf = subprocess.run(["fzf", "--exact", "--filter", f"cats.md {first}-{last}", "--delimiter", "\t",
                          "--with-nth", "1"], input=listed.stdout, capture_output=True, text=True, timeout=60)
    assert fzf.returncode == 0, (fzf.stdout, fzf.stderr)
    choice = fzf.stdout.splitlines()[0]
    assert f"lines {first}-{last}" in choice
    opened = launch(["open", "-", *editor(tools)], env, stdin=choice + "\n")
    assert opened.returncode == 0, opened.stderr
    assert tools.wait_call("edit") == [str(tools_path(d, "cats.md")), str(first)]


def deepest_lines(d, query: str) -> tuple[int, int]:
    """The lines of the hit of cats.md furthest into the file: opening it at line 1 would be wrong."""
    lines = max(h["lines"] for h in d.search(query, top_k=LIMIT) if h["filename"] == "cats.md")
    assert lines[0] > 1
    return lines[0], lines[1]


def test_in_a_terminal_a_text_hit_opens_in_the_editor_at_its_line(d, tools):
    require_tool("fzf")
    first, last = deepest_lines(d, "cat number 27")
    master, slave = os.openpty()  # the script's stdin and stdout are a terminal, as under fzf in one
    try:
        r = subprocess.run([str(SCRIPT), "pick", "--menu", f"fzf --exact --filter 'cats.md {first}-{last}'",
                            "cat number 27"], env=tools.env(state(d), EDITOR=str(tools.bin / "edit")),
                           stdin=slave, stdout=slave, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(slave)
        os.close(master)
    assert r.returncode == 0, r.stderr
    # $EDITOR +LINE FILE, run in the terminal: it has ended when pick returns
    assert tools.calls("edit") == [[f"+{first}", str(tools_path(d, "cats.md"))]]


def tools_path(d, name: str) -> Path:
    return d.base.parent / "docs" / name


def test_pick_runs_the_menu_and_opens_a_pdf_at_its_page(d, tools):
    require_tool("fzf")
    hits = d.search("lighthouse keeper lantern", top_k=LIMIT)
    assert any(target(h["uri"]).get("page") == 2 for h in hits), [h["uri"] for h in hits]
    tools.pdf_app("org.pwmt.zathura.desktop")
    # fzf --filter as the menu: it prints its matches best first, and pick takes the first; "!1-2"
    # leaves out the passage that runs over both pages
    r = launch(["pick", "--menu", "fzf --filter 'keeper.pdf !1-2'", "lighthouse keeper lantern"],
               tools.env(state(d)))
    assert r.returncode == 0, r.stderr
    assert tools.wait_call("zathura") == ["--page=2", str(tools_path(d, "keeper.pdf"))]
    assert tools.calls("xdg-open") == []


def test_a_pdf_without_a_viewer_that_takes_a_page_goes_to_the_system_opener(d, tools):
    tools.pdf_app(None)
    uri = next(h["uri"] for h in d.search("lighthouse keeper lantern", top_k=LIMIT) if "keeper.pdf" in h["uri"])
    r = launch(["open", uri], tools.env())
    assert r.returncode == 0, r.stderr
    assert tools.wait_call("xdg-open") == [str(tools_path(d, "keeper.pdf"))]


def rofi(args: list[str], env: dict, retv: int | None = None, entry: str | None = None,
         info: str | None = None) -> tuple[list[tuple[str, dict]], dict]:
    """Run the script as rofi does; (rows with their options, mode options)."""
    env = dict(env)
    if retv is not None:
        env["ROFI_RETV"] = str(retv)
    if info is not None:
        env["ROFI_INFO"] = info
    r = launch(["rofi", *args] + ([entry] if entry is not None else []), env)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    rows, mode = [], {}
    for line in r.stdout.split("\n")[:-1]:
        text, _, opts = line.partition("\0")
        fields = opts.split("\x1f") if opts else []
        if not text:  # "\0key\x1fvalue": a mode option
            mode[fields[0]] = fields[1]
        else:
            rows.append((text, dict(zip(fields[::2], fields[1::2]))))
    return rows, mode


def test_rofi_script_mode_protocol(d, tools):
    require_tool("rofi")
    # the script prints rows rofi 1.7 understands ("nonselectable"): the packaged rofi must be one
    version = subprocess.run(["rofi", "-v"], capture_output=True, text=True, timeout=30).stdout
    m = re.search(r"(\d+)\.(\d+)", version)
    assert m and (int(m.group(1)), int(m.group(2))) >= (1, 7), version
    env = tools.env(state(d))
    args = editor(tools)
    # first call, no argument: a prompt and an unselectable line saying what to do (no rows: rofi quits)
    rows, mode = rofi(args, env, retv=0)
    assert mode["prompt"] == "ragweed" and "Type" in mode["message"]
    assert rows and all(o.get("nonselectable") == "true" for _, o in rows)
    # typed text that matches no row comes back as a custom entry: the hits, each with its uri as info
    rows, mode = rofi(args, env, retv=2, entry="cat number 27")
    want = [h["uri"] for h in d.search("cat number 27", top_k=LIMIT)]
    assert [o["info"] for _, o in rows] == want
    assert all(text.startswith(f"[{n}] ") for n, (text, _) in enumerate(rows, 1))
    assert mode["message"].startswith(f"{len(want)} results")
    # the chosen row: rofi passes its text and its info; the hit opens and no rows are printed, so rofi closes
    first, last = deepest_lines(d, "cat number 27")
    text, opts = next((t, o) for t, o in rows if f"cats.md  § Cats, lines {first}-{last}" in t)
    rows, _ = rofi(args, env, retv=1, entry=text, info=opts["info"])
    assert rows == []
    assert tools.wait_call("edit") == [str(tools_path(d, "cats.md")), str(first)]
    # typed text that looks like an option is still a query
    rows, _ = rofi(args, env, retv=2, entry="-n 3 --help")
    assert rows and all("info" in o for _, o in rows)


def test_rofi_shows_errors_and_no_results_as_a_message(d, tools, tmp_path):
    require_tool("rofi")
    rows, mode = rofi([], tools.env(not_running_state(tmp_path)), retv=2, entry="tea")
    assert mode["message"].startswith("ragweed: ragweedd is not running (no port file at ")
    assert [o.get("nonselectable") for _, o in rows] == ["true"]  # rofi stays open on the message
    rows, mode = rofi(["--path-glob", NOWHERE], tools.env(state(d)), retv=2, entry="tea")
    assert mode["message"] == 'ragweed: no results for "tea"'
    assert [o.get("nonselectable") for _, o in rows] == ["true"]


def one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stdout == "" and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    return r.stderr.strip()


def test_errors_are_one_clear_line(d, tools, tmp_path):
    gone = not_running_state(tmp_path)
    err = one_line_error(launch(["list", "tea"], tools.env(gone)))
    assert err == (f"ragweed-launch: ragweedd is not running (no port file at {gone / 'port'}) — start it with "
                   "`ragweedd run`, or install it as a service with `ragweedctl service install`")
    bad = bad_token_state(d, tmp_path)
    err = one_line_error(launch(["list", "tea"], tools.env(bad)))
    assert err.startswith(f"ragweed-launch: the server on 127.0.0.1:{d.port} did not prove it knows the API token "
                          f"in {bad / 'token'}, so the token was not sent"), err
    assert one_line_error(launch(["list", "--path-glob", NOWHERE, "tea"], tools.env(state(d)))) == \
        'ragweed-launch: no results for "tea"'
    err = one_line_error(launch(["list", "--ragweedctl", str(tmp_path / "nowhere" / "ragweedctl"), "tea"],
                                tools.env(state(d))))
    assert err.startswith("ragweed-launch: cannot run ") and "--ragweedctl" in err
    (tools_path(d, "gone.txt")).write_text("x\n")
    uri = (tools_path(d, "gone.txt")).as_uri() + "#L1"
    (tools_path(d, "gone.txt")).unlink()
    assert one_line_error(launch(["open", uri], tools.env())) == \
        f"ragweed-launch: {tools_path(d, 'gone.txt')} is gone (moved or deleted since it was indexed)"


def test_finds_the_daemon_as_ragweedctl_does(d, tools, tmp_path):
    """--state-dir, then RAGWEED_STATE_DIR, then the OS state directory ($XDG_STATE_HOME/ragweedd)."""
    gone = not_running_state(tmp_path)
    want = [h["uri"] for h in d.search("green tea", top_k=LIMIT)]

    def uris(r):
        assert r.returncode == 0, r.stderr
        return [x.rsplit("\t", 1)[1] for x in r.stdout.splitlines()]

    assert uris(launch(["list", "--state-dir", str(state(d)), "green tea"], tools.env(gone))) == want
    assert uris(launch(["list", "green tea"], tools.env(state(d)))) == want
    xdg = tmp_path / "xdg-state"
    xdg.mkdir()
    os.symlink(state(d), xdg / "ragweedd")
    assert uris(launch(["list", "green tea"], tools.env(XDG_STATE_HOME=str(xdg)))) == want
    r = launch(["list", "green tea"], tools.env(XDG_STATE_HOME=str(tmp_path / "elsewhere")))
    assert "ragweedd is not running (no port file at " + str(tmp_path / "elsewhere" / "ragweedd" / "port") in r.stderr
