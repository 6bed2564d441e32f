"""The MCP tools end to end, through the official SDK's own clients: ``ragweedctl mcp`` over stdio
(proxying to a real daemon subprocess) and the daemon's streamable-HTTP endpoint ``/mcp``; read-only
and write tool sets, typed inputs, clear errors, and /mcp behind the API's token and Origin checks.
The daemon has no LLM, so ``ask`` answers with quoted passages."""

from __future__ import annotations

import base64
import json
import os
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
import requests
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from ragweedd.answer import NO_LLM_LABEL
from tests.fakes.llm_server import API_KEY, FakeLLMServer
from tests.system.conftest import ROOT, Daemon, serving, wait_indexed

READ_TOOLS = {"search", "get_document", "ask", "list_collections", "status"}
WRITE_TOOLS = {"add_collection", "scan", "upload"}
CATS = "".join(f"Line {n} about cats: cat number {n} purrs when content.\n" for n in range(1, 41))
DOCS = {
    "cats.md": "# Cats\n\n" + CATS,
    "tea.txt": "Green tea should steep for two minutes at eighty degrees Celsius, never boiling water.\n",
}


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    base = tmp_path_factory.mktemp("mcpd")
    docs = base / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text)
    with serving(Daemon(base / "d", {"notes": [docs]}, extra="chunk_size = 64")) as dm:
        wait_indexed(dm, "notes", 2)
        dm.wait_idle()
        yield dm


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


@asynccontextmanager
async def stdio_session(state_dir: Path, *args: str, errlog=None):
    params = StdioServerParameters(command=sys.executable, args=["-m", "ragweedd.cli.ctl", "mcp", "--state-dir",
                                                                 str(state_dir), *args], env=_env(), cwd=str(ROOT))
    async with stdio_client(params, errlog=errlog or sys.stderr) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        yield s


@asynccontextmanager
async def http_session(dm: Daemon, headers: dict | None = None):
    hdrs = dm.headers if headers is None else headers
    async with httpx2.AsyncClient(headers=hdrs, timeout=60) as client, \
            streamable_http_client(f"http://127.0.0.1:{dm.port}/mcp", http_client=client) as (r, w), \
            ClientSession(r, w) as s:
        await s.initialize()
        yield s


def sessions(dm: Daemon):
    return {"stdio": lambda: stdio_session(dm.base / "state"), "http": lambda: http_session(dm)}


def data(res) -> dict:
    assert not res.is_error, res.content
    if res.structured_content is not None:
        out = res.structured_content
        return out.get("result", out) if set(out) == {"result"} else out
    return json.loads(res.content[0].text)


def error_text(res) -> str:
    assert res.is_error, res
    return " ".join(getattr(c, "text", "") for c in res.content)


def run(fn):
    return anyio.run(fn)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_read_only_tools_and_their_typed_inputs(d, transport):
    async def go():
        async with sessions(d)[transport]() as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert set(tools) == READ_TOOLS
            props = tools["search"].input_schema["properties"]
            assert tools["search"].input_schema["required"] == ["query"]
            assert {"query", "collections", "path_glob", "file_type", "limit"} <= set(props)
            assert set(tools["get_document"].input_schema["properties"]) >= {"doc_key", "path", "page", "line_start",
                                                                             "line_end", "max_bytes"}
            assert tools["search"].annotations.read_only_hint is True
    run(go)


def test_stdio_allow_writes_adds_write_tools(d):
    async def go():
        async with stdio_session(d.base / "state", "--allow-writes") as s:
            assert {t.name for t in (await s.list_tools()).tools} == READ_TOOLS | WRITE_TOOLS
    run(go)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_search_status_collections_ask(d, transport):
    async def go():
        async with sessions(d)[transport]() as s:
            hits = data(await s.call_tool("search", {"query": "green tea steep", "limit": 3}))["hits"]
            assert hits and len(hits) <= 3
            top = hits[0]
            assert top["filename"] == "tea.txt" and "Green tea" in top["text"]
            assert top["uri"].startswith("file://") and top["uri"].split("#")[0].endswith("/tea.txt")
            assert top["span"] and top["lines"] == [1, 1]
            only_md = data(await s.call_tool("search", {"query": "tea cats", "file_type": "md"}))["hits"]
            assert only_md and {h["filename"] for h in only_md} == {"cats.md"}

            st = data(await s.call_tool("status", {}))
            assert [c["name"] for c in st["collections"]] == ["notes"] and st["collections"][0]["documents"] == 2
            cols = data(await s.call_tool("list_collections", {}))["collections"]
            assert [c["name"] for c in cols] == ["notes"]

            a = data(await s.call_tool("ask", {"query": "how long should green tea steep?"}))
            assert a["mode"] == "passages" and a["label"] == NO_LLM_LABEL and a["answer"].startswith(NO_LLM_LABEL)
            assert a["sources"][0]["filename"] == "tea.txt" and a["sources"][0]["uri"].endswith("/tea.txt#L1")
            assert "two minutes" in a["sources"][0]["quotes"][0]["text"]
            # the tree retrieval is the LLM's reading of the outline: without one it says so
            tree = error_text(await s.call_tool("ask", {"query": "how long should green tea steep?",
                                                        "retrieval": "tree"}))
            assert "tree" in tree and "[llm] synthesis" in tree, tree
            assert "retrieval" in error_text(await s.call_tool("ask", {"query": "x", "retrieval": "chunks"}))
    run(go)


def _tree_reply(provider, messages):
    p = messages[-1]["content"]
    if p.startswith("You choose which documents"):
        return '{"documents": ["%s"]}' % __import__("re").search(r"\[(D\d+)\][^\n]*tea\.txt", p).group(1)
    if p.startswith("You choose which sections"):
        return '{"sections": ["D1.1"]}'
    return "Green tea should steep for two minutes [1]. Cats purr at ninety degrees [1]."


def test_ask_with_an_llm_carries_the_citation_check_and_the_tree(tmp_path):
    with FakeLLMServer(models=("test-model",), reply=_tree_reply) as llm:
        extra = "\n".join(["chunk_size = 64", "[llm]", 'synthesis = "openai:test-model"',
                           f'openai_base_url = "{llm.url}/v1"', f'openai_api_key = "{API_KEY}"', "max_retries = 0"])
        docs = tmp_path / "docs"
        docs.mkdir()
        for name, text in DOCS.items():
            (docs / name).write_text(text)
        with serving(Daemon(tmp_path / "d", {"notes": [docs]}, extra=extra)) as dm:
            wait_indexed(dm, "notes", 2)

            async def go():
                async with http_session(dm) as s:
                    a = data(await s.call_tool("ask", {"query": "how long should green tea steep?",
                                                       "retrieval": "tree"}))
                    assert a["mode"] == "llm" and a["tree"]["fallback"] is None, a
                    assert [c["supported"] for c in a["citation_checks"]] == [True, False], a["citation_checks"]
                    assert a["citations_verified"]["unsupported"] == 1, a["citations_verified"]
            run(go)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_get_document_by_path_and_key_with_line_range_and_byte_cap(d, transport):
    async def go():
        async with sessions(d)[transport]() as s:
            doc = data(await s.call_tool("get_document", {"path": "docs/cats.md", "line_start": 10,
                                                          "line_end": 12}))
            want = "\n".join(("# Cats\n\n" + CATS).split("\n")[9:12])
            assert doc["text"] == want and doc["lines"] == [10, 12] and doc["truncated"] is False
            whole = data(await s.call_tool("get_document", {"doc_key": doc["doc_key"], "max_bytes": 100}))
            assert whole["truncated"] is True and len(whole["text"].encode()) <= 100
            assert ("# Cats\n\n" + CATS).startswith(whole["text"])
            full = data(await s.call_tool("get_document", {"doc_key": doc["doc_key"], "max_bytes": 100_000}))
            assert full["text"] == ("# Cats\n\n" + CATS).rstrip("\n") and full["truncated"] is False

            # a search hit leads to its document: the hit's doc_key works, its doc_id (a hash) is explained
            hit = data(await s.call_tool("search", {"query": "cat number purrs", "limit": 1}))["hits"][0]
            assert hit["doc_key"] == doc["doc_key"]
            from_hit = data(await s.call_tool("get_document", {"doc_key": hit["doc_key"], "max_bytes": 100_000}))
            assert from_hit["text"] == full["text"]
            by_id = error_text(await s.call_tool("get_document", {"doc_key": hit["doc_id"]}))
            assert "doc_id" in by_id and "pass the hit's doc_key" in by_id, by_id

            assert "exactly one of doc_key or path" in error_text(await s.call_tool("get_document", {}))
            assert "no indexed document has the path" in error_text(
                await s.call_tool("get_document", {"path": "nope.md"}))
            assert "outside the document" in error_text(
                await s.call_tool("get_document", {"path": "cats.md", "line_start": 500}))
            bad = error_text(await s.call_tool("get_document", {"path": "cats.md", "max_bytes": 5}))
            assert "max_bytes" in bad
            assert "query" in error_text(await s.call_tool("search", {"limit": 3}))
            nope = await s.call_tool("search", {"query": "x", "collections": ["nope"]})
            assert "collection 'nope' does not exist" in error_text(nope)
            bad_name = await s.call_tool("search", {"query": "x", "collections": ["bad name!"]})
            assert "'bad name!' is not allowed" in error_text(bad_name)
            assert "limit" in error_text(await s.call_tool("search", {"query": "x", "limit": 0}))
    run(go)


def test_http_mcp_refuses_missing_token_and_foreign_origin(d):
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}}
    base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    url = f"http://127.0.0.1:{d.port}/mcp"
    r = requests.post(url, json=init, headers=base, timeout=30)
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    r = requests.post(url, json=init, headers={**base, **d.headers, "Origin": "https://evil.example"}, timeout=30)
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_origin"
    r = requests.post(url, json=init, headers={**base, **d.headers, "Host": "evil.example"}, timeout=30)
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_host"
    r = requests.post(url, json=init, headers={**base, **d.headers}, timeout=30)
    assert r.status_code == 200, r.text

    async def go():
        with pytest.raises(Exception) as ei:
            async with http_session(d, headers={"Authorization": "Bearer " + "x" * 43}):
                pass
        # the SDK's client reports an HTTP error status as this JSON-RPC error
        assert "Server returned an error response" in repr(ei.value), repr(ei.value)
    run(go)


def test_stdio_without_daemon_says_so_on_stderr_and_in_tool_errors(tmp_path):
    errlog = open(tmp_path / "stderr.txt", "w+")

    async def go():
        async with stdio_session(tmp_path / "no-state", errlog=errlog) as s:
            assert {t.name for t in (await s.list_tools()).tools} == READ_TOOLS
            for tool, args in (("status", {}), ("search", {"query": "cats"})):
                msg = error_text(await s.call_tool(tool, args))
                assert "ragweedd is not running" in msg and "ragweedd run" in msg, msg
    run(go)
    errlog.flush()
    err = (tmp_path / "stderr.txt").read_text()
    assert "ragweedctl mcp: ragweedd is not running (no port file at" in err, err


def test_daemon_mcp_allow_writes_offers_write_tools_that_work(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Alpha text about sailing boats.\n")
    with serving(Daemon(tmp_path / "d", {"notes": [docs]}, extra="mcp_allow_writes = true")) as dm:
        wait_indexed(dm, "notes", 1)

        async def go():
            async with http_session(dm) as s:
                assert {t.name for t in (await s.list_tools()).tools} == READ_TOOLS | WRITE_TOOLS
                up = data(await s.call_tool("upload", {"collection": "notes", "filename": "kites.md",
                                                       "text": "Kites fly best in steady wind.\n"}))
                assert up["collection"] == "notes" and up["source_file"].endswith("kites.md")
                assert "path separator" in error_text(await s.call_tool(
                    "upload", {"collection": "notes", "filename": "../x.md", "text": "x"}))
                assert "exactly one of text or content_base64" in error_text(await s.call_tool(
                    "upload", {"collection": "notes", "filename": "y.md"}))
                assert data(await s.call_tool("scan", {"name": "notes"}))["queued"] is True
                assert "collection 'nope' does not exist" in error_text(await s.call_tool("scan", {"name": "nope"}))
                # what would never be indexed, and a root no watcher can follow, are refused here too
                assert "does not index" in error_text(await s.call_tool(
                    "upload", {"collection": "notes", "filename": "tool.exe", "text": "MZ"}))
                assert "invisible format characters" in error_text(await s.call_tool(
                    "upload", {"collection": "notes", "filename": "\u202edm.exe", "text": "x"}))
                assert "the filesystem root" in error_text(await s.call_tool(
                    "add_collection", {"name": "everything", "paths": ["/"]}))
            # the stdio server proxies the same write tools through the HTTP API
            async with stdio_session(dm.base / "state", "--allow-writes") as s:
                blob = base64.b64encode(b"Gliders ride thermals.\n").decode()
                up = data(await s.call_tool("upload", {"collection": "notes", "filename": "gliders.txt",
                                                       "content_base64": blob}))
                assert up["source_file"].endswith("gliders.txt") and up["size_bytes"] == 23
                assert "not valid base64" in error_text(await s.call_tool(
                    "upload", {"collection": "notes", "filename": "z.txt", "content_base64": "***"}))
                assert "the filesystem root" in error_text(await s.call_tool(
                    "add_collection", {"name": "everything", "paths": ["/"]}))
                added = data(await s.call_tool("add_collection", {"name": "more", "paths": [str(docs)]}))
                assert added["name"] == "more"
        run(go)
        wait_indexed(dm, "notes", 3)
        assert {h["filename"] for h in dm.search("gliders thermals")} >= {"gliders.txt"}


def test_read_only_server_refuses_write_tools(d):
    async def go():
        async with http_session(d) as s:
            res = await s.call_tool("upload", {"collection": "notes", "filename": "x.md", "text": "x"})
            assert res.is_error and "upload" in error_text(res)
        async with stdio_session(d.base / "state") as s:
            res = await s.call_tool("scan", {"name": "notes"})
            assert res.is_error and "scan" in error_text(res)
    run(go)


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """A daemon over real files: the repository's examples and a few of its docs."""
    import shutil

    base = tmp_path_factory.mktemp("mcpreal")
    docs = base / "docs"
    docs.mkdir()
    files = [*sorted((ROOT / "examples").iterdir()), ROOT / "README.md", ROOT / "docs" / "api.md",
             ROOT / "docs" / "mcp.md", ROOT / "docs" / "daemon.md"]
    for f in files:
        shutil.copy(f, docs / f.name)
    with serving(Daemon(base / "d", {"notes": [docs]})) as dm:
        wait_indexed(dm, "notes", len(files), timeout=120)
        dm.wait_idle(120)
        yield dm


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_text_part_is_a_short_reading_and_the_structured_content_keeps_every_field(real, transport):
    """A client that forwards both parts of a result pays for both: the text is one short block per
    hit (or source), not the JSON again (it was 14,500 characters for this search); the structured
    content keeps every field."""
    async def go():
        async with sessions(real)[transport]() as s:
            res = await s.call_tool("search", {"query": "how do I feed the sourdough starter"})
            text, hits = res.content[0].text, res.structured_content["hits"]
            assert len(res.content) == 1 and len(hits) == 10  # the default limit
            assert len(text) < 3000, (len(text), text)
            with pytest.raises(ValueError):
                json.loads(text)
            for i, h in enumerate(hits, 1):
                assert {"doc_id", "doc_key", "collection", "filename", "source_file", "uri", "span", "lines",
                        "score", "text"} <= set(h), h
                block = text.split(f"\n[{i}] ", 1)[1].split("\n[", 1)[0]
                assert block.startswith(h["filename"]) and f"doc_key {h['doc_key']}" in block, block
                assert block.endswith(h["uri"]) and block.count("\n") == 2, block
                snippet = block.split("\n")[1].strip().strip("…")
                assert snippet and snippet[:40] in " ".join(h["text"].split()), block
            assert any("sourdough.txt" in h["filename"] for h in hits)

            a = await s.call_tool("ask", {"query": "how often do I feed the starter?"})
            text, answer = a.content[0].text, a.structured_content
            assert text.startswith(answer["answer"].strip()) and len(text) < len(answer["answer"]) + 1500, text
            for src in answer["sources"]:
                assert f"[{src['n']}] {src['filename']}" in text, text
                assert "quotes" in src and "span" in src and "text" in src
                assert (src["quotes"][0]["uri"] if len(src["quotes"]) == 1 else src["uri"]) in text, text

            st = await s.call_tool("status", {})
            assert "\n" not in st.content[0].text and json.loads(st.content[0].text) == st.structured_content
    run(go)


def test_get_and_delete_on_mcp_are_405_and_hold_no_connection(d):
    """Stateless /mcp opens no event stream: a GET used to stay open for ever on keep-alive pings."""
    import requests


    for method in ("GET", "DELETE"):
        r = requests.request(method, f"http://127.0.0.1:{d.port}/mcp", timeout=10,
                             headers={**d.headers, "Accept": "text/event-stream, application/json"})
        assert r.status_code == 405 and r.headers["Allow"] == "POST", (method, r.status_code, r.text[:200])
        assert r.json()["error"]["code"] == "method_not_allowed"


def test_the_mcp_transports_refusals_are_the_documented_json_rpc_errors(d):
    """What the MCP transport refuses is answered as a JSON-RPC error object, and the OpenAPI
    document says so for each status (it documented the REST envelope, which they are not)."""
    import requests

    from ragweedd.api import openapi

    url = f"http://127.0.0.1:{d.port}/mcp"
    accept = {"Accept": "application/json, text/event-stream"}
    cases = [({**d.headers, **accept, "Content-Type": "application/json"}, b"{not json"),
             ({**d.headers, "Accept": "text/plain", "Content-Type": "application/json"},
              b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'),
             ({**d.headers, **accept, "Content-Type": "text/plain"}, b'{"jsonrpc": "2.0", "id": 1}')]
    seen = set()
    for headers, body in cases:
        r = requests.post(url, data=body, headers=headers, timeout=30)
        documented = openapi.DOCUMENT["paths"]["/mcp"]["post"]["responses"]
        assert str(r.status_code) in documented, (r.status_code, r.text[:200])
        schema = documented[str(r.status_code)]["content"]["application/json"]["schema"]
        openapi.validate(r.json(), schema, "body")
        assert r.json()["jsonrpc"] == "2.0" and r.json()["error"]["message"]
        seen.add(r.status_code)
    assert seen == {400, 406, 415}, seen
