"""The same error, on every face, against a real daemon: its message is worded once; what to do is
said in the face's own terms. ragweedctl names its commands (and no HTTP status), the API keeps its
envelope with a hint naming its routes (and the action a client words itself), and MCP names its
tools, in the same words over stdio (``ragweedctl mcp``, through the API) and over ``/mcp`` (the
engine in-process), both through the official SDK client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.system.conftest import ROOT, Daemon, serving, wait_indexed
from tests.system.test_mcp import error_text, http_session, stdio_session

HIST = "0123456789abcdef"
TREE_MSG = "ask mode 'tree' needs an LLM to read the section trees, and [llm] synthesis is empty"
TREE_HINT = 'set [llm] synthesis (e.g. synthesis = "ollama:qwen2.5:7b"), or ask without mode \'tree\''
LIST_CTL = "list them with `ragweedctl collections`"
LIST_MCP = "list them with the `list_collections` tool"


def cases(folder: Path, file: Path) -> list[dict]:
    """Each common error: how each face provokes it, its message, and its hint on each face."""
    return [
        dict(name="unknown collection", ctl=["search", "-c", "nope", "cats"],
             http=("POST", "/v1/search", {"query": "cats", "collections": ["nope"]}),
             mcp=("search", {"query": "cats", "collections": ["nope"]}),
             message="collection 'nope' does not exist", action={"id": "list_collections"},
             api="list them with GET /v1/collections", in_ctl=LIST_CTL, in_mcp=LIST_MCP),
        dict(name="unknown collection (ask)", ctl=["ask", "-c", "nope", "cats"],
             http=("POST", "/v1/ask", {"query": "cats", "collections": ["nope"], "stream": False}),
             mcp=("ask", {"query": "cats", "collections": ["nope"]}),
             message="collection 'nope' does not exist", action={"id": "list_collections"},
             api="list them with GET /v1/collections", in_ctl=LIST_CTL, in_mcp=LIST_MCP),
        dict(name="unknown document", ctl=["docs", "99999"], http=("GET", "/v1/documents/99999", None),
             mcp=("get_document", {"doc_key": "99999"}),
             message="document '99999' does not exist", action={"id": "list_documents"},
             api="document keys come from GET /v1/documents",
             in_ctl="list documents and their keys with `ragweedctl docs`",
             in_mcp="pass a `search` hit's doc_key, or the file's path"),
        dict(name="unknown history id", ctl=["history", HIST], http=("GET", f"/v1/history/{HIST}", None), mcp=None,
             message=f"history entry '{HIST}' does not exist", action={"id": "list_history"},
             api="list entries with GET /v1/history", in_ctl="list them with `ragweedctl history`", in_mcp=None),
        dict(name="collection already exists", ctl=["add", "notes", str(folder)],
             http=("POST", "/v1/collections", {"name": "notes", "paths": [str(folder)]}),
             mcp=("add_collection", {"name": "notes", "paths": [str(folder)]}),
             message="collection 'notes' already exists",
             action={"id": "collection_name_taken", "args": {"name": "notes"}},
             api="choose another name, or remove it first (an HTTP delete of /v1/collections/notes)",
             in_ctl="choose another name, or remove it first with `ragweedctl remove notes`",
             in_mcp="choose another name (the `list_collections` tool shows the names taken)"),
        dict(name="not a folder", ctl=["add", "other", str(file)],
             http=("POST", "/v1/collections", {"name": "other", "paths": [str(file)]}),
             mcp=("add_collection", {"name": "other", "paths": [str(file)]}),
             message=f"'{file}' is not a folder", action=None,
             api="give existing folders as the collection's paths",
             in_ctl="give existing folders as the collection's paths",
             in_mcp="give existing folders as the collection's paths"),
        dict(name="no LLM configured", ctl=["ask", "--tree", "cats"],
             http=("POST", "/v1/ask", {"query": "cats", "mode": "tree", "stream": False}),
             mcp=("ask", {"query": "cats", "retrieval": "tree"}),
             message=TREE_MSG, action=None, api=TREE_HINT, in_ctl=TREE_HINT, in_mcp=TREE_HINT),
    ]


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    base = tmp_path_factory.mktemp("faces")
    folder = base / "notes"
    folder.mkdir()
    (folder / "cats.md").write_text("Cats purr when they are content.\n")
    (base / "a-file.txt").write_text("not a folder\n")
    with serving(Daemon(base / "d", {"notes": [folder]}, extra="mcp_allow_writes = true")) as dm:
        wait_indexed(dm, "notes", 1)
        dm.wait_idle()
        dm.cases = cases(folder, base / "a-file.txt")
        yield dm


def ctl(state_dir: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragweedd.cli.ctl", "--state-dir", str(state_dir), *argv],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          timeout=120)


def test_the_api_envelope_keeps_code_and_message_with_a_hint_naming_the_route(d):
    for c in d.cases:
        method, path, body = c["http"]
        r = d.api(method, path, json=body)
        assert r.status_code in (400, 404), (c["name"], r.status_code, r.text)
        err = r.json()["error"]
        want = {"code": "not_found" if r.status_code == 404 else "bad_request", "message": c["message"],
                "hint": c["api"]}
        if c["action"]:
            want["action"] = c["action"]
        assert err == want, c["name"]
    # a field the request may not have is named, with the ones it may
    err = d.api("POST", "/v1/search", json={"query": "cats", "colour": "red"}).json()["error"]
    assert err["code"] == "bad_request" and "colour" in err["message"] and "collections" in err["hint"], err


def test_ragweedctl_says_what_went_wrong_and_which_command_helps_without_http_words(d):
    for c in d.cases:
        p = ctl(d.base / "state", *c["ctl"])
        assert p.returncode == 2, (c["name"], p.returncode, p.stderr)
        assert p.stderr == f"ragweedctl: {c['message']} — {c['in_ctl']}\n", c["name"]
    # --json keeps the daemon's whole error object on stdout; stderr is the same sentence
    p = ctl(d.base / "state", "--json", "search", "-c", "nope", "cats")
    assert p.returncode == 2 and p.stderr == f"ragweedctl: collection 'nope' does not exist — {LIST_CTL}\n"
    assert json.loads(p.stdout) == {"error": {"code": "not_found", "message": "collection 'nope' does not exist",
                                              "hint": "list them with GET /v1/collections",
                                              "action": {"id": "list_collections"}}}


def test_mcp_over_stdio_and_over_http_words_each_error_the_same_naming_mcp_tools(d):
    calls = [c for c in d.cases if c["mcp"]] + [
        # a bad argument: the SDK checks the tool's input schema, the same on both transports
        dict(name="bad argument", mcp=("search", {"query": "cats", "limit": 0}), message=None),
        dict(name="missing argument", mcp=("search", {"limit": 3}), message=None)]
    said: dict[str, list[str]] = {}

    async def go():
        for transport, session in (("stdio", lambda: stdio_session(d.base / "state", "--allow-writes")),
                                   ("http", lambda: http_session(d))):
            async with session() as s:
                said[transport] = [error_text(await s.call_tool(*c["mcp"])) for c in calls]
    anyio.run(go)
    assert said["stdio"] == said["http"]
    for c, text in zip(calls, said["http"]):
        if c["message"]:
            assert text.endswith(f"{c['message']} — {c['in_mcp']}"), (c["name"], text)
            assert "/v1/" not in text and "ragweedctl collections" not in text, (c["name"], text)
    # which argument, and what it must be: no pydantic type codes or links
    assert said["http"][-2].endswith("argument 'limit': input should be greater than or equal to 1 (got 0)")
    assert said["http"][-1].endswith("argument 'query' is required")
    assert not any("pydantic" in t or "[type=" in t for t in said["http"]), said["http"]


def test_no_daemon_ragweedctl_and_mcp_stdio_say_how_to_start_it(tmp_path):
    p = ctl(tmp_path / "none", "search", "cats")
    port = tmp_path / "none" / "port"
    assert p.returncode == 3
    assert p.stderr == (f"ragweedctl: ragweedd is not running (no port file at {port}) — start it with "
                        "`ragweedd run`, or install it as a service with `ragweedctl service install`\n")
    p = ctl(tmp_path / "none", "--json", "status")
    assert json.loads(p.stdout)["error"]["action"] == {"id": "start_daemon"} and p.returncode == 3

    async def go():
        with open(tmp_path / "mcp-stderr.txt", "w") as errlog:
            async with stdio_session(tmp_path / "none", errlog=errlog) as s:
                return error_text(await s.call_tool("search", {"query": "cats"}))
    text = anyio.run(go)
    assert text.endswith(f"ragweedd is not running (no port file at {port}) — the user must start it "
                         "(`ragweedd run`, or `ragweedctl service install`); then call the tool again"), text


def test_a_daemon_with_nothing_indexed_says_how_to_add_a_collection_then_to_wait_on_each_face(tmp_path):
    waiting = ("files still being read are searchable in moments ({}); an empty collection needs files "
               "in its folders")
    empty = tmp_path / "empty"
    empty.mkdir()
    with serving(Daemon(tmp_path / "bare", {}, extra="mcp_allow_writes = true")) as dm:
        for step, (action, api, in_ctl, in_mcp) in enumerate((
                ("add_collection", "add a collection of folders with POST /v1/collections",
                 "add a collection of folders with `ragweedctl add NAME FOLDER`",
                 "the user adds a collection of folders with `ragweedctl add NAME FOLDER` (or the "
                 "`add_collection` tool, where writes are allowed)"),
                ("wait_for_indexing", waiting.format("GET /v1/status shows the progress"),
                 waiting.format("`ragweedctl status` shows the progress"),
                 waiting.format("the `status` tool shows the progress")))):
            if step == 1:  # a collection with nothing in it yet
                assert dm.api("POST", "/v1/collections", json={"name": "empty", "paths": [str(empty)]}).ok
                dm.wait_idle()
            r = dm.api("POST", "/v1/search", json={"query": "cats"})
            err = r.json()["error"]
            assert r.status_code == 400 and err["message"].startswith("nothing is indexed yet in "), err
            assert err["hint"] == api and err["action"] == {"id": action}
            if step == 1:
                assert err["message"] == "nothing is indexed yet in empty"
            p = ctl(dm.base / "state", "search", "cats")
            assert p.stderr == f"ragweedctl: {err['message']} — {in_ctl}\n" and p.returncode == 2

            async def go():
                out = []
                for session in (lambda: stdio_session(dm.base / "state"), lambda: http_session(dm)):
                    async with session() as s:
                        out.append(error_text(await s.call_tool("search", {"query": "cats"})))
                return out
            stdio, http = anyio.run(go)
            assert stdio == http and http.endswith(f"{err['message']} — {in_mcp}"), (stdio, http)
