"""The API contract, checked against the REAL engine (ragweedd.engine.DaemonEngine over a daemon core
built by ragweedd.services.open_daemon: hash embedder, real ingest threads and watcher), on each
storage backend in turn: the data directory's SQLite files, and a real PostgreSQL with pgvector
(``backend``; tests/pg_fixture.py). The same answers are expected of both.

1. Conformance: every route of the OpenAPI document is called (``CASES``; a test proves none is
   missing) and its body is validated against the schema the document gives for that status: the
   200 response's ``application/json`` schema, ``x-event-data[event]`` for each SSE event, and the
   ``ApiError`` envelope for 4xx (404 unknown collection/document/history id, 400 bad body, 401
   missing token, 413 too large).
2. Behaviour: what each route does (filters, paging, uploads landing and getting indexed, answers
   with and without an LLM, continuation, history), moved here from the FakeEngine-era route tests.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from urllib.parse import quote

import pytest

from ragweedd import __version__  # noqa: E402
from ragweedd.api import openapi  # noqa: E402
from ragweedd.api.security import STATE_KEY  # noqa: E402
from ragweedd.errors import RequestError  # noqa: E402
from tests.api_support import DOCS, raw_http, running_api, sse_events, wait_until  # noqa: E402
from tests.fakes.llm_server import API_KEY, FakeLLMServer  # noqa: E402
from tests.pg_fixture import fresh_database  # noqa: E402

DOC = openapi.document()
BROKEN_PDF = b"%PDF-1.4 this is not really a pdf\n"  # a damaged PDF: its document is 'failed'
FILES = {**DOCS, "broken.pdf": BROKEN_PDF}
MAX_BODY = 256 * 1024

# --------------------------------------------------------------------------- schema helpers
def _resolve_response(resp: dict) -> dict:
    while "$ref" in resp:
        resp = DOC["components"]["responses"][resp["$ref"].rsplit("/", 1)[1]]
    return resp


def response_schema(path: str, method: str, status: int = 200, media: str = "application/json") -> dict:
    """The schema the OpenAPI document gives for this operation's ``status`` response."""
    responses = DOC["paths"][path][method.lower()]["responses"]
    resp = _resolve_response(responses.get(str(status)) or responses["default"])
    return resp["content"][media]["schema"]


def conform(path: str, method: str, status: int, body) -> None:
    """Validate a JSON body against the documented schema of that status (errors: ApiError)."""
    openapi.validate(body, response_schema(path, method, status), f"{method.upper()} {path} {status} body")


def conform_events(path: str, method: str, events: list[tuple[str, dict]]) -> None:
    """Each SSE event's data against x-event-data[event] of the operation's 200 response."""
    per_event = DOC["paths"][path][method.lower()]["responses"]["200"]["x-event-data"]
    assert events, "no events"
    for i, (name, data) in enumerate(events):
        assert name in per_event, f"event {name!r} is not documented"
        openapi.validate(data, per_event[name], f"{method.upper()} {path} event {i} ({name}) data")


def err(resp, status: int, code: str | None = None) -> dict:
    st, _, body = resp
    assert st == status, body
    assert isinstance(body, dict) and set(body) == {"error"}, body
    assert {"code", "message"} <= set(body["error"]) and body["error"]["message"]
    if code:
        assert body["error"]["code"] == code, body
    return body["error"]


# --------------------------------------------------------------------------- fixtures
def llm_reply(provider, messages):
    return "Cats purr when they are content [1]."


def llm_toml(llm: FakeLLMServer) -> str:
    return "\n".join(["[llm]", 'synthesis = "openai:test-model"', f'openai_base_url = "{llm.url}/v1"',
                      f'openai_api_key = "{API_KEY}"', "max_retries = 0", "timeout_s = 20"])


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def backend(request) -> str:
    """The storage backend every daemon of this module's tests runs on, each in turn."""
    return request.param


@contextlib.contextmanager
def module_store(backend: str, request) -> Iterator[str | None]:
    """None for the SQLite files, else a PostgreSQL database of its own for one module daemon."""
    if backend == "sqlite":
        yield None
        return
    with fresh_database(request.getfixturevalue("pg_server")) as dsn:
        yield dsn


@pytest.fixture
def store(backend, request) -> str | None:
    """For a test's own daemon: None for the SQLite files, else a fresh PostgreSQL database."""
    return None if backend == "sqlite" else request.getfixturevalue("pg_dsn")


@pytest.fixture(scope="module")
def api(tmp_path_factory, backend, request):
    """Read-only tests (searches and answers add history entries, nothing else changes)."""
    with module_store(backend, request) as dsn, \
            running_api(tmp_path_factory.mktemp("contract"), files=FILES, expect=set(DOCS),
                        max_body_bytes=MAX_BODY, store=dsn) as a:
        wait_until(lambda: a.ok("GET", "/v1/documents?state=failed")["total"] == 1, 30, what="broken.pdf failed")
        # the SQLite daemon builds its vector index after the ingest: a test run first (-k) would see it empty
        wait_until(lambda: a.status()["index_sizes"].get("notes") == a.probe().vectors("notes") > 0, 30,
                   what="the vector index to hold every vector")
        yield a


@pytest.fixture
def fresh(tmp_path, store):
    """A daemon of its own for tests that add, remove, scan or upload."""
    with running_api(tmp_path, max_body_bytes=MAX_BODY, store=store) as a:
        yield a


@pytest.fixture(scope="module")
def llm():
    with FakeLLMServer(models=("test-model",), reply=llm_reply) as srv:
        yield srv


@pytest.fixture(scope="module")
def llm_api(tmp_path_factory, llm, backend, request):
    """An LLM-backed daemon (the OpenAI SDK against tests/fakes/llm_server.py); max_tokens 16 lets a
    scripted long reply be cut, so answers can be continued."""
    with module_store(backend, request) as dsn, \
            running_api(tmp_path_factory.mktemp("contract-llm"), extra_toml=llm_toml(llm),
                        top_toml="max_tokens = 16", max_body_bytes=MAX_BODY, store=dsn) as a:
        yield a


@pytest.fixture(autouse=True)
def _fresh_llm_script(request):
    if "llm" in request.fixturenames:
        srv = request.getfixturevalue("llm")
        srv.script.clear()
    yield


LONG = "Cats purr when they are content and relaxed [1], which owners notice at home in the evenings [1]."


def cut_answer(a, llm) -> dict:
    """An answer cut at max_tokens (the fake server truncates at max_tokens * 4 characters)."""
    llm.push({"text": LONG})
    body = a.ok("POST", "/v1/ask", {"query": "do cats purr?", "stream": False})
    assert body["finish_reason"] == "max_tokens" and body["continuable"], body
    return body


def first_doc_key(a, name: str = "hnsw.md") -> str:
    return a.indexed()[name]["doc_key"]


# --------------------------------------------------------------------------- conformance table
@dataclass
class Case:
    fixture: str
    method: str
    path: str  # the documented path template
    call: Callable  # (api, llm or None) -> (status, headers, body)
    status: int = 200
    sse: bool = False
    raw: str | None = None  # a 200 that is not JSON: the content type it must have


CASES: dict[str, Case] = {}


def case(cid: str, fixture: str, method: str, path: str, status: int = 200, sse: bool = False,
         raw: str | None = None):
    def deco(fn):
        CASES[cid] = Case(fixture, method, path, fn, status, sse, raw)
        return fn
    return deco


def _multipart(name: str, data: bytes, boundary: str = "BOUND") -> tuple[bytes, dict]:
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
            f"Content-Type: text/markdown\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    return body, {"Content-Type": f"multipart/form-data; boundary={boundary}"}


case("health", "api", "GET", "/v1/health")(lambda a, _: a.request("GET", "/v1/health", token=None))
case("status", "api", "GET", "/v1/status")(lambda a, _: a.request("GET", "/v1/status"))
case("openapi", "api", "GET", "/v1/openapi.json")(lambda a, _: a.request("GET", "/v1/openapi.json"))
case("collections-list", "api", "GET", "/v1/collections")(lambda a, _: a.request("GET", "/v1/collections"))
case("collections-add", "fresh", "POST", "/v1/collections")(
    lambda a, _: a.request("POST", "/v1/collections", {"name": "papers", "paths": [str(a.docs_dir)],
                                                       "ignore": ["*.tmp"], "topic": "ml"}))
case("collections-add-400-duplicate", "api", "POST", "/v1/collections", 400)(
    lambda a, _: a.request("POST", "/v1/collections", {"name": "notes", "paths": [str(a.docs_dir)]}))
case("collections-add-400-bad-body", "api", "POST", "/v1/collections", 400)(
    lambda a, _: a.request("POST", "/v1/collections", {"name": "../etc", "paths": []}))
case("collections-remove", "fresh", "DELETE", "/v1/collections/{name}")(
    lambda a, _: (a.ok("POST", "/v1/collections", {"name": "papers", "paths": [str(a.docs_dir)]}),
                  a.request("DELETE", "/v1/collections/papers"))[1])
case("collections-remove-400-from-config", "api", "DELETE", "/v1/collections/{name}", 400)(
    lambda a, _: a.request("DELETE", "/v1/collections/notes"))
case("collections-remove-404", "api", "DELETE", "/v1/collections/{name}", 404)(
    lambda a, _: a.request("DELETE", "/v1/collections/ghost"))
case("scan", "fresh", "POST", "/v1/collections/{name}/scan")(
    lambda a, _: a.request("POST", "/v1/collections/notes/scan"))
case("scan-404", "api", "POST", "/v1/collections/{name}/scan", 404)(
    lambda a, _: a.request("POST", "/v1/collections/ghost/scan"))
case("reanalyze", "fresh", "POST", "/v1/collections/{name}/reanalyze")(
    lambda a, _: a.request("POST", "/v1/collections/notes/reanalyze"))
case("rebuild-fts", "fresh", "POST", "/v1/collections/{name}/rebuild-fts")(
    lambda a, _: a.request("POST", "/v1/collections/notes/rebuild-fts"))
case("upload-raw", "fresh", "POST", "/v1/collections/{name}/documents")(
    lambda a, _: a.request("POST", "/v1/collections/notes/documents?filename=raw.txt", raw=b"raw upload words",
                           headers={"Content-Type": "application/octet-stream"}))
case("upload-multipart", "fresh", "POST", "/v1/collections/{name}/documents")(
    lambda a, _: a.request("POST", "/v1/collections/notes/documents", raw=_multipart("m.md", b"# Title\nbody")[0],
                           headers=_multipart("m.md", b"")[1]))
case("upload-404", "api", "POST", "/v1/collections/{name}/documents", 404)(
    lambda a, _: a.request("POST", "/v1/collections/ghost/documents?filename=a.txt", raw=b"x",
                           headers={"Content-Type": "application/octet-stream"}))
case("upload-413", "api", "POST", "/v1/collections/{name}/documents", 413)(
    lambda a, _: a.request("POST", "/v1/collections/notes/documents?filename=big.txt", raw=b"x" * (MAX_BODY + 1),
                           headers={"Content-Type": "application/octet-stream"}))
case("documents", "api", "GET", "/v1/documents")(lambda a, _: a.request("GET", "/v1/documents"))
case("documents-filtered", "api", "GET", "/v1/documents")(
    lambda a, _: a.request("GET", "/v1/documents?collection=notes&state=indexed&path_glob=*.md&offset=1&limit=1"))
case("documents-400", "api", "GET", "/v1/documents", 400)(lambda a, _: a.request("GET", "/v1/documents?limit=0"))
case("documents-404-collection", "api", "GET", "/v1/documents", 404)(
    lambda a, _: a.request("GET", "/v1/documents?collection=ghost"))
case("document-show", "api", "GET", "/v1/documents/{doc_key}")(
    lambda a, _: a.request("GET", f"/v1/documents/{first_doc_key(a)}"))
case("document-show-failed", "api", "GET", "/v1/documents/{doc_key}")(
    lambda a, _: a.request("GET", "/v1/documents/" + a.ok("GET", "/v1/documents?state=failed")["items"][0]["doc_key"]))
case("document-404", "api", "GET", "/v1/documents/{doc_key}", 404)(
    lambda a, _: a.request("GET", "/v1/documents/999999"))
case("search", "api", "POST", "/v1/search")(lambda a, _: a.request("POST", "/v1/search", {"query": "attention token"}))
case("search-filtered", "api", "POST", "/v1/search")(
    lambda a, _: a.request("POST", "/v1/search", {"query": "graph neighbours", "collections": ["notes"], "top_k": 5,
                                                  "path_glob": "*.md", "file_type": "md",
                                                  "doc_id": a.ok("POST", "/v1/search", {"query": "hnsw"})
                                                  ["results"][0]["doc_id"]}))
case("search-400", "api", "POST", "/v1/search", 400)(lambda a, _: a.request("POST", "/v1/search", {}))
case("search-400-not-json", "api", "POST", "/v1/search", 400)(
    lambda a, _: a.request("POST", "/v1/search", raw=b"{not json", headers={"Content-Type": "application/json"}))
case("search-401", "api", "POST", "/v1/search", 401)(
    lambda a, _: a.request("POST", "/v1/search", {"query": "x"}, token=None))
case("search-404-collection", "api", "POST", "/v1/search", 404)(
    lambda a, _: a.request("POST", "/v1/search", {"query": "x", "collections": ["ghost"]}))
case("search-413", "api", "POST", "/v1/search", 413)(
    lambda a, _: a.request("POST", "/v1/search", {"query": "x" * (MAX_BODY + 10)}))
case("status-401", "api", "GET", "/v1/status", 401)(lambda a, _: a.request("GET", "/v1/status", token=None))
case("ask-sse-no-llm", "api", "POST", "/v1/ask", sse=True)(
    lambda a, _: a.request("POST", "/v1/ask", {"query": "attention token"}))
case("ask-json-no-llm", "api", "POST", "/v1/ask")(
    lambda a, _: a.request("POST", "/v1/ask?stream=false", {"query": "attention token"}))
case("ask-sse-llm", "llm_api", "POST", "/v1/ask", sse=True)(
    lambda a, _: a.request("POST", "/v1/ask", {"query": "do cats purr?"}))
case("ask-json-llm", "llm_api", "POST", "/v1/ask")(
    lambda a, _: a.request("POST", "/v1/ask", {"query": "do cats purr?", "stream": False}))
case("ask-400", "api", "POST", "/v1/ask", 400)(lambda a, _: a.request("POST", "/v1/ask", {"query": ""}))
case("ask-404-collection", "api", "POST", "/v1/ask", 404)(
    lambda a, _: a.request("POST", "/v1/ask", {"query": "x", "collections": ["ghost"]}))
case("ask-continue-sse", "llm_api", "POST", "/v1/ask/{history_id}/continue", sse=True)(
    lambda a, llm: a.request("POST", f"/v1/ask/{cut_answer(a, llm)['history_id']}/continue"))
case("ask-continue-json", "llm_api", "POST", "/v1/ask/{history_id}/continue")(
    lambda a, llm: a.request("POST", f"/v1/ask/{cut_answer(a, llm)['history_id']}/continue?stream=false"))
case("ask-continue-404", "api", "POST", "/v1/ask/{history_id}/continue", 404)(
    lambda a, _: a.request("POST", "/v1/ask/0000000000000000/continue"))
case("ask-continue-400-search-entry", "api", "POST", "/v1/ask/{history_id}/continue", 400)(
    lambda a, _: a.request("POST", f"/v1/ask/{a.ok('POST', '/v1/search', {'query': 'x'})['history_id']}/continue"))
case("history", "api", "GET", "/v1/history")(lambda a, _: a.request("GET", "/v1/history?offset=0&limit=5"))
case("history-400", "api", "GET", "/v1/history", 400)(lambda a, _: a.request("GET", "/v1/history?offset=x"))
case("history-show-search", "api", "GET", "/v1/history/{history_id}")(
    lambda a, _: a.request("GET", f"/v1/history/{a.ok('POST', '/v1/search', {'query': 'sqlite'})['history_id']}"))
case("history-show-ask", "llm_api", "GET", "/v1/history/{history_id}")(
    lambda a, _: a.request("GET", "/v1/history/" + a.ok("POST", "/v1/ask", {"query": "cats", "stream": False})
                           ["history_id"]))
case("history-show-404", "api", "GET", "/v1/history/{history_id}", 404)(
    lambda a, _: a.request("GET", "/v1/history/0000000000000000"))
# conversations (tests/integration/test_conversations_flow.py has what they do)
def _thread(a) -> str:
    first = a.ok("POST", "/v1/ask?stream=false", {"query": "attention token"})
    a.ok("POST", "/v1/ask?stream=false", {"query": "and its heads?", "conversation_id": first["conversation_id"]})
    return first["conversation_id"]


case("ask-sse-follow-up", "api", "POST", "/v1/ask", sse=True)(
    lambda a, _: a.request("POST", "/v1/ask", {"query": "and its heads?", "conversation_id": _thread(a)}))
case("ask-json-follow-up-llm", "llm_api", "POST", "/v1/ask")(
    lambda a, _: a.request("POST", "/v1/ask?stream=false", {"query": "and dogs?", "conversation_id": a.ok(
        "POST", "/v1/ask?stream=false", {"query": "do cats purr?"})["conversation_id"]}))
case("ask-404-conversation", "api", "POST", "/v1/ask", 404)(
    lambda a, _: a.request("POST", "/v1/ask", {"query": "x", "conversation_id": "c0000000000000000"}))
case("ask-400-conversation-id", "api", "POST", "/v1/ask", 400)(
    lambda a, _: a.request("POST", "/v1/ask", {"query": "x", "conversation_id": "0000000000000000"}))
case("conversations", "api", "GET", "/v1/conversations")(
    lambda a, _: (_thread(a), a.request("GET", "/v1/conversations?offset=0&limit=5"))[1])
case("conversations-400", "api", "GET", "/v1/conversations", 400)(
    lambda a, _: a.request("GET", "/v1/conversations?limit=0"))
case("conversation-show", "api", "GET", "/v1/conversations/{conversation_id}")(
    lambda a, _: a.request("GET", f"/v1/conversations/{_thread(a)}"))
case("conversation-show-llm", "llm_api", "GET", "/v1/conversations/{conversation_id}")(
    lambda a, _: a.request("GET", "/v1/conversations/" + a.ok("POST", "/v1/ask?stream=false", {"query": "cats"})
                           ["conversation_id"]))
case("conversation-show-404", "api", "GET", "/v1/conversations/{conversation_id}", 404)(
    lambda a, _: a.request("GET", "/v1/conversations/c0000000000000000"))
case("conversation-show-400", "api", "GET", "/v1/conversations/{conversation_id}", 400)(
    lambda a, _: a.request("GET", "/v1/conversations/not-an-id"))
case("conversation-delete", "api", "DELETE", "/v1/conversations/{conversation_id}")(
    lambda a, _: a.request("DELETE", f"/v1/conversations/{_thread(a)}"))
case("conversation-delete-404", "api", "DELETE", "/v1/conversations/{conversation_id}", 404)(
    lambda a, _: a.request("DELETE", "/v1/conversations/c0000000000000000"))
# the web UI's sign-in codes and original files (tests/integration/test_web_security.py has the rest)
case("login-code", "api", "POST", "/v1/login-codes")(lambda a, _: a.request("POST", "/v1/login-codes"))
case("login-code-401", "api", "POST", "/v1/login-codes", 401)(
    lambda a, _: a.request("POST", "/v1/login-codes", token=None))
case("file", "api", "GET", "/v1/files/{doc_key}", raw="text/plain; charset=utf-8")(
    lambda a, _: a.request("GET", f"/v1/files/{first_doc_key(a)}"))
case("file-404-failed", "api", "GET", "/v1/files/{doc_key}", 404)(
    lambda a, _: a.request("GET", "/v1/files/" + a.ok("GET", "/v1/documents?state=failed")["items"][0]["doc_key"]))
case("file-404", "api", "GET", "/v1/files/{doc_key}", 404)(lambda a, _: a.request("GET", "/v1/files/999999"))
# the web UI's pages: no token needed
case("web-ui", "api", "GET", "/", raw="text/html; charset=utf-8")(lambda a, _: a.request("GET", "/", token=None))
case("web-asset", "api", "GET", "/ui/{asset}", raw="text/javascript; charset=utf-8")(
    lambda a, _: a.request("GET", "/ui/app.js", token=None))
case("web-asset-404", "api", "GET", "/ui/{asset}", 404)(lambda a, _: a.request("GET", "/ui/nope.js", token=None))
case("favicon", "api", "GET", "/favicon.ico", raw="image/svg+xml")(
    lambda a, _: a.request("GET", "/favicon.ico", token=None))
case("web-login-page", "api", "GET", "/login", raw="text/html; charset=utf-8")(
    lambda a, _: a.request("GET", "/login", token=None))
case("web-login", "api", "POST", "/login")(
    lambda a, _: a.request("POST", "/login", {"code": a.ok("POST", "/v1/login-codes")["code"]}, token=None))
case("web-login-403", "api", "POST", "/login", 403)(
    lambda a, _: a.request("POST", "/login", {"code": "nope"}, token=None))
case("web-login-400", "api", "POST", "/login", 400)(lambda a, _: a.request("POST", "/login", {}, token=None))
# the OpenAI-compatible face (its streaming is checked through the SDK in tests/system/test_openai_compat.py)
_CHAT = {"messages": [{"role": "user", "content": "do cats purr?"}]}
case("openai-models", "api", "GET", "/v1/models")(lambda a, _: a.request("GET", "/v1/models"))
case("openai-chat-no-llm", "api", "POST", "/v1/chat/completions")(
    lambda a, _: a.request("POST", "/v1/chat/completions", {"model": "ragweedd/all", **_CHAT}))
case("openai-chat-llm", "llm_api", "POST", "/v1/chat/completions")(
    lambda a, _: a.request("POST", "/v1/chat/completions", {"model": "ragweedd/notes", "temperature": 0.2, **_CHAT}))
case("openai-chat-404-model", "api", "POST", "/v1/chat/completions", 404)(
    lambda a, _: a.request("POST", "/v1/chat/completions", {"model": "gpt-4o", **_CHAT}))
case("openai-chat-400-no-question", "api", "POST", "/v1/chat/completions", 400)(
    lambda a, _: a.request("POST", "/v1/chat/completions", {"model": "ragweedd/all", "messages": []}))

@pytest.mark.parametrize("cid", list(CASES))
def test_route_conforms_to_documented_schema(cid, backend, request):
    c = CASES[cid]
    a = request.getfixturevalue(c.fixture)
    srv = request.getfixturevalue("llm") if c.fixture == "llm_api" else None
    if srv is not None:  # asked for here, not by name: _fresh_llm_script did not see it
        srv.script.clear()  # (a stall a disconnected answer never took would hang this one)
    st, hdrs, body = c.call(a, srv)
    assert st == c.status, (st, body)
    if c.sse:
        assert hdrs["Content-Type"].startswith("text/event-stream"), hdrs
        events = sse_events(body)
        assert events[-1][0] == "done", [e for e, _ in events]
        conform_events(c.path, c.method, events)
    elif c.raw:
        assert hdrs["Content-Type"] == c.raw and isinstance(body, bytes) and body, hdrs
    else:
        assert hdrs["Content-Type"].startswith("application/json"), hdrs
        conform(c.path, c.method, c.status, body)


def test_every_documented_route_is_in_the_conformance_table():
    # /mcp is the daemon's (tests/system/test_mcp.py drives it with the official SDK)
    documented = {(m.upper(), p) for p, ops in DOC["paths"].items() for m in ops if p != "/mcp"}
    ok = {(c.method, c.path) for c in CASES.values()
          if c.status == 200 or (c.status == 303 and "200" not in DOC["paths"][c.path][c.method.lower()]["responses"])}
    assert documented - ok == set(), "routes without a success conformance case"
    assert {(c.method, c.path) for c in CASES.values()} <= documented, "cases for undocumented routes"
    codes = {c.status for c in CASES.values()}
    assert {400, 401, 404, 413} <= codes
    assert {("POST", "/v1/ask", True), ("POST", "/v1/ask", False), ("POST", "/v1/ask/{history_id}/continue", True),
            ("POST", "/v1/ask/{history_id}/continue", False)} <= {(c.method, c.path, c.sse) for c in CASES.values()
                                                                   if c.status == 200}


# --------------------------------------------------------------------------- the check can fail
def test_schema_check_can_fail(api):
    status = api.status()
    conform("/v1/status", "get", 200, status)  # the real body passes...
    renamed = dict(status)
    renamed["queue_size"] = renamed.pop("queue_depth")
    with pytest.raises(RequestError, match="queue_depth"):  # ...a renamed field does not
        conform("/v1/status", "get", 200, renamed)
    nested = json.loads(json.dumps(status))
    nested["ingest"]["files_total"] = nested["ingest"].pop("total")  # the field ragweedctl once misread
    with pytest.raises(RequestError, match="total"):
        conform("/v1/status", "get", 200, nested)
    wrong_type = {**status, "pid": str(status["pid"])}
    with pytest.raises(RequestError, match="pid"):
        conform("/v1/status", "get", 200, wrong_type)
    with pytest.raises(RequestError):
        conform("/v1/status", "get", 404, {"error": {"code": "x"}})  # no message
    with pytest.raises(RequestError, match="unknown"):
        conform_events("/v1/ask", "post", [("token", {"type": "token", "text": "a", "extra": 1})])


# --------------------------------------------------------------------------- a core without its scheduler
def test_status_and_reanalyze_of_a_core_started_without_scheduler(tmp_path, store):
    with running_api(tmp_path, files={"a.txt": "alpha words"}, scheduler=False, wait=False, store=store) as a:
        st, _, body = a.request("GET", "/v1/status")
        assert st == 200, body
        conform("/v1/status", "get", 200, body)
        st, _, body = a.request("POST", "/v1/collections/notes/reanalyze")
        assert st == 200, body


# --------------------------------------------------------------------------- basics
def test_health_and_status(api):
    st, _, body = api.request("GET", "/v1/health", token=None)
    assert st == 200 and body == {"ok": True, "version": __version__}
    st, hdrs, s = api.request("GET", "/v1/status")
    assert st == 200 and hdrs["Cache-Control"] == "no-store" and hdrs["X-Request-Id"]
    assert [c["name"] for c in s["collections"]] == ["notes"] and s["collections"][0]["documents"] == len(DOCS)
    assert s["files_by_state"] == {"indexed": len(DOCS), "failed": 1}
    assert s["embedder"]["id"].startswith("hash:64") and s["embedder"]["dim"] == 64
    assert s["ingest"]["done_since_start"] >= len(FILES) and not s["ingest"]["running"]
    assert s["queue_depth"] == 0 and s["index_sizes"]["notes"] == len(DOCS)
    assert {j["name"] for j in s["next_jobs"]} >= {"integrity_check", "cluster_reanalysis"}


def test_the_daemon_keeps_its_index_in_the_backend_under_test(api, backend):
    """The parametrisation is real: the documents the API lists are the rows of that backend."""
    probe = api.probe()
    assert type(probe).__name__ == {"sqlite": "SqliteProbe", "postgresql": "PgProbe"}[backend]
    assert set(probe.paths("notes")) == {str(api.docs_dir / n) for n in DOCS}
    assert probe.chunks("notes") == probe.vectors("notes") == api.status()["index_sizes"]["notes"]
    assert (api.paths.data / "collections" / "notes" / "rag.sqlite3").exists() == (backend == "sqlite")


def test_unknown_route_and_method(api):
    e = err(api.request("GET", "/v1/nope"), 404, "not_found")
    assert "/v1/nope" in e["message"]
    err(api.request("GET", "/nope"), 404, "not_found")  # "/" is the web UI (docs/web.md)
    st, hdrs, body = api.request("PUT", "/v1/status")
    e = err((st, hdrs, body), 405, "method_not_allowed")
    assert "GET" in e["hint"] and hdrs["Allow"] == "GET"
    err(api.request("DELETE", "/v1/search"), 405)


# --------------------------------------------------------------------------- collections
def test_collections_lifecycle(fresh, tmp_path):
    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "adam.txt").write_text("The Adam optimiser keeps running averages of gradients and their squares.\n")
    (papers / "skip.tmp").write_text("ignored scratch file\n")
    st, _, body = fresh.request("POST", "/v1/collections", {"name": "papers", "paths": [str(papers)],
                                                            "ignore": ["*.tmp"], "topic": "ml"})
    assert st == 200 and body["name"] == "papers" and body["ignore"] == ["*.tmp"] and body["topic"] == "ml"
    assert body["paths"] == [str(papers)] and not body["from_config"]
    fresh.wait_indexed({"adam.txt"}, collection="papers")
    assert set(fresh.indexed("papers")) == {"adam.txt"}, "the ignore glob is applied"
    names = [c["name"] for c in fresh.ok("GET", "/v1/collections")["items"]]
    assert names == ["notes", "papers"]
    hits = fresh.ok("POST", "/v1/search", {"query": "Adam optimiser gradients", "collections": ["papers"]})["results"]
    assert [h["filename"] for h in hits] == ["adam.txt"] and hits[0]["uri"] == (papers / "adam.txt").as_uri() + "#L1"
    e = err(fresh.request("POST", "/v1/collections", {"name": "papers", "paths": [str(papers)]}), 400)
    assert "papers" in e["message"]
    for op in ("scan", "reanalyze", "rebuild-fts"):
        assert fresh.ok("POST", f"/v1/collections/papers/{op}") == {"collection": "papers", "queued": True}
    probe = fresh.probe()
    assert set(probe.paths("papers")) == {str(papers / "adam.txt")} and probe.chunks("papers") == 1
    assert fresh.ok("DELETE", "/v1/collections/papers") == {"name": "papers", "removed": True}
    assert (papers / "adam.txt").exists(), "removing a collection never touches the user's files"
    # what the collection held leaves the store with it
    assert probe.paths("papers") == {} and probe.chunks("papers") == probe.vectors("papers") == 0
    assert probe.live_rows("papers") == {}
    e = err(fresh.request("POST", "/v1/collections/papers/scan"), 404, "not_found")
    assert "papers" in e["message"] and e["hint"]
    err(fresh.request("DELETE", "/v1/collections/papers"), 404)
    err(fresh.request("POST", "/v1/search", {"query": "Adam", "collections": ["papers"]}), 404)
    assert [c["name"] for c in fresh.ok("GET", "/v1/collections")["items"]] == ["notes"]


def test_scan_picks_up_a_file_written_behind_the_watchers_back(fresh):
    fresh.write_file("late.txt", "Quokkas are small marsupials from Rottnest Island.\n")
    assert fresh.ok("POST", "/v1/collections/notes/scan")["queued"] is True
    fresh.wait_indexed({"late.txt"})
    hits = fresh.ok("POST", "/v1/search", {"query": "quokka marsupials Rottnest"})["results"]
    assert hits[0]["filename"] == "late.txt"


def test_rebuild_fts_keeps_keyword_search_working(fresh):
    assert fresh.ok("POST", "/v1/collections/notes/rebuild-fts")["queued"] is True
    hits = fresh.ok("POST", "/v1/search", {"query": "FTS5 porter tokenizer"})["results"]
    assert hits[0]["filename"] == "sqlite.txt"


@pytest.mark.parametrize("body,field", [
    ({"paths": ["/x"]}, "name"),
    ({"name": "ok"}, "paths"),
    ({"name": "../etc", "paths": ["/x"]}, "name"),
    ({"name": "", "paths": ["/x"]}, "name"),
    ({"name": "a" * 65, "paths": ["/x"]}, "name"),
    ({"name": "ok", "paths": []}, "paths"),
    ({"name": "ok", "paths": "/x"}, "paths"),
    ({"name": "ok", "paths": [""]}, "paths[0]"),
    ({"name": "ok", "paths": [3]}, "paths[0]"),
    ({"name": "ok", "paths": ["/x"], "ignore": "*.tmp"}, "ignore"),
    ({"name": "ok", "paths": ["/x"], "colour": "red"}, "colour"),
    ({"name": "ok", "paths": ["/x"], "topic": 5}, "topic"),
    ([], "body"),
    ("notes", "body"),
    (None, "body"),
])
def test_add_collection_bad_bodies(api, body, field):
    e = err(api.request("POST", "/v1/collections", raw=json.dumps(body).encode(),
                        headers={"Content-Type": "application/json"}), 400, "bad_request")
    assert field in e["message"]


def test_add_collection_over_a_missing_folder(api, tmp_path):
    e = err(api.request("POST", "/v1/collections", {"name": "nowhere", "paths": [str(tmp_path / "missing")]}), 400)
    assert "missing" in e["message"] or "folder" in e["message"]
    assert "nowhere" not in [c["name"] for c in api.ok("GET", "/v1/collections")["items"]]


# --------------------------------------------------------------------------- search
@pytest.mark.parametrize("raw,ctype,what", [
    (b"{not json", "application/json", "not valid JSON"),
    (b"\xff\xfe", "application/json", "not valid JSON"),
    (b"", "application/json", "not valid JSON"),
    (b'{"query": "x"}', "text/plain", "must be JSON"),
    (b'{"query": "x"}', "application/x-www-form-urlencoded", "must be JSON"),
])
def test_search_bad_encodings(api, raw, ctype, what):
    e = err(api.request("POST", "/v1/search", raw=raw, headers={"Content-Type": ctype}), 400)
    assert what in e["message"]


@pytest.mark.parametrize("body", [
    {}, {"query": ""}, {"query": 5}, {"query": "x", "top_k": 0}, {"query": "x", "top_k": "3"},
    {"query": "x", "top_k": True}, {"query": "x", "collections": "notes"}, {"query": "x", "collections": ["a/b"]},
    {"query": "x", "file_type": "../pdf"}, {"query": "x", "stream": False}, {"query": "x" * 8001},
    {"query": "a\x00b"},
])
def test_search_bad_fields(api, body):
    err(api.request("POST", "/v1/search", body), 400, "bad_request")


def test_search_and_filters(api):
    body = api.ok("POST", "/v1/search", {"query": "HNSW graph nearest neighbours"})
    assert body["results"] and body["history_id"]
    hit = body["results"][0]
    assert hit["filename"] == "hnsw.md" and hit["collection"] == "notes" and hit["rank"] == 1
    # hnsw.md is one chunk over its 7 lines: the uri opens them
    assert hit["lines"] == [1, 7] and hit["uri"] == (api.docs_dir / "hnsw.md").as_uri() + "#L1-L7"
    assert hit["source_file"] == str(api.docs_dir / "hnsw.md")
    assert hit["rel_score"] == 1.0 and "greedy search" in hit["text"]
    body = api.ok("POST", "/v1/search", {"query": "attention token", "file_type": "html", "top_k": 5})
    assert {h["filename"] for h in body["results"]} == {"attention.html"}
    body = api.ok("POST", "/v1/search", {"query": "attention token", "path_glob": "*.md"})
    assert body["results"] and {h["filename"] for h in body["results"]} <= {"hnsw.md", "cats.md"}
    body = api.ok("POST", "/v1/search", {"query": "attention", "doc_id": hit["doc_id"]})
    assert {h["doc_id"] for h in body["results"]} == {hit["doc_id"]}
    assert api.ok("POST", "/v1/search", {"query": "attention", "path_glob": "*.nomatch"})["results"] == []
    e = err(api.request("POST", "/v1/search", {"query": "x", "collections": ["ghost"]}), 404)
    assert "ghost" in e["message"]


# --------------------------------------------------------------------------- documents
def test_documents_listing_paging_and_show(api):
    body = api.ok("GET", "/v1/documents?collection=notes&limit=2")
    assert len(body["items"]) == 2 and body["total"] == len(FILES)
    page2 = api.ok("GET", "/v1/documents?collection=notes&limit=2&offset=2")
    page3 = api.ok("GET", "/v1/documents?collection=notes&limit=2&offset=4")
    keys = [d["doc_key"] for p in (body, page2, page3) for d in p["items"]]
    assert len(keys) == len(set(keys)) == len(FILES), "pages are disjoint and cover everything"
    failed = api.ok("GET", "/v1/documents?state=failed")
    assert [d["filename"] for d in failed["items"]] == ["broken.pdf"] and "PDF" in failed["items"][0]["error"]
    doc = api.ok("GET", f"/v1/documents/{failed['items'][0]['doc_key']}")
    assert doc["state"] == "failed" and doc["chunks_detail"] == [] and doc["chunks"] == 0
    md = api.ok("GET", "/v1/documents?path_glob=*.md")
    assert sorted(d["filename"] for d in md["items"]) == ["cats.md", "hnsw.md"] and md["total"] == 2
    key = first_doc_key(api, "hnsw.md")
    doc = api.ok("GET", f"/v1/documents/{key}")
    assert doc["state"] == "indexed" and doc["chunks"] == len(doc["chunks_detail"]) >= 1
    assert "greedy search" in " ".join(c["text"] for c in doc["chunks_detail"])
    assert doc["chunks_detail"][0]["uri"].startswith((api.docs_dir / "hnsw.md").as_uri())
    err(api.request("GET", "/v1/documents/nope-0000"), 404, "not_found")
    err(api.request("GET", "/v1/documents/999999"), 404, "not_found")


@pytest.mark.parametrize("query", ["limit=0", "limit=1001", "limit=x", "offset=-1", "offset=1e3",
                                   "state=broken", "collection=a%2Fb", "limit=99999999999999"])
def test_documents_bad_query(api, query):
    err(api.request("GET", f"/v1/documents?{query}"), 400, "bad_request")


# --------------------------------------------------------------------------- history
def test_history(api):
    s = api.ok("POST", "/v1/search", {"query": "sqlite keyword"})
    body = api.ok("GET", "/v1/history?limit=5")
    assert body["items"][0]["id"] == s["history_id"] and body["items"][0]["kind"] == "search"
    h = api.ok("GET", f"/v1/history/{s['history_id']}")
    assert h["query"] == "sqlite keyword" and h["kind"] == "search"
    assert [r["embedding_id"] for r in h["results"]] == [r["embedding_id"] for r in s["results"]]
    s2 = api.ok("POST", "/v1/search", {"query": "second"})
    p0, p1 = api.ok("GET", "/v1/history?offset=0&limit=1"), api.ok("GET", "/v1/history?offset=1&limit=1")
    assert p0["items"][0]["id"] == s2["history_id"] and p1["items"][0]["id"] == s["history_id"]
    assert p0["total"] == p1["total"] >= 2
    err(api.request("GET", "/v1/history/h999999"), 404)
    err(api.request("GET", "/v1/history?offset=x"), 400)


# --------------------------------------------------------------------------- answers
def test_ask_without_llm_streams_cited_passages(api):
    st, hdrs, payload = api.request("POST", "/v1/ask", {"query": "attention token"})
    assert st == 200 and hdrs["Content-Type"].startswith("text/event-stream")
    events = sse_events(payload)
    kinds = [e for e, _ in events]
    assert kinds[0] == "sources" and kinds[-1] == "done" and "token" in kinds
    assert set(kinds[1:-1]) <= {"annotation", "context", "token"}
    answer = "".join(d["text"] for e, d in events if e == "token")
    done = events[-1][1]
    assert done["mode"] == "passages" and done["answer"] == answer and "[1]" in answer
    assert done["sources"][0]["filename"] == "attention.html" and done["finish_reason"] == "stop"
    # the JSON form carries the same answer
    js = api.ok("POST", "/v1/ask?stream=false", {"query": "attention token"})
    assert js["answer"] == answer and js["sources"] and js["history_id"] and js["finish_reason"] == "stop"
    js2 = api.ok("POST", "/v1/ask", {"query": "attention token", "stream": False})
    assert js2["answer"] == answer and js2["history_id"] != js["history_id"]
    entry = api.ok("GET", f"/v1/history/{js['history_id']}")
    assert entry["kind"] == "ask" and entry["status"] == "done" and entry["answer"] == answer


def test_ask_errors_before_stream_are_http_errors(api):
    err(api.request("POST", "/v1/ask", {"query": "x", "collections": ["ghost"]}), 404, "not_found")
    err(api.request("POST", "/v1/ask?stream=maybe", {"query": "x"}), 400)
    err(api.request("POST", "/v1/ask/h424242/continue"), 404)
    err(api.request("POST", "/v1/ask", {"query": "   "}), 400)
    assert api.server.app[STATE_KEY].answers_in_flight == 0


def test_ask_when_nothing_is_indexed_is_a_400_with_a_hint(tmp_path, store):
    with running_api(tmp_path, files={}, store=store) as a:
        e = err(a.request("POST", "/v1/ask", {"query": "anything"}), 400, "bad_request")
        # the configured collection has no file yet: it says so and where progress shows
        assert "nothing is indexed yet in notes" in e["message"] and "GET /v1/status" in e["hint"]
        assert e["action"] == {"id": "wait_for_indexing"}
        e = err(a.request("POST", "/v1/search", {"query": "anything"}), 400, "bad_request")
        assert "nothing is indexed" in e["message"]


def test_ask_with_llm_cites_sources(llm_api, llm):
    st, _, payload = llm_api.request("POST", "/v1/ask", {"query": "do cats purr?"})
    assert st == 200
    events = sse_events(payload)
    kinds = [e for e, _ in events]
    assert kinds[0] == "sources" and "context" in kinds and kinds[-1] == "done" and kinds.count("token") > 1
    done = events[-1][1]
    assert "".join(d["text"] for e, d in events if e == "token") == done["answer"] == llm_reply(None, None)
    assert done["mode"] == "llm" and done["provider"] == "openai:test-model" and done["cited_numbers"] == [1]
    context = next(d for e, d in events if e == "context")["sources"]
    assert context[0]["n"] == 1 and done["cited"][0]["embedding_id"] == context[0]["embedding_id"]
    assert llm.requests and "[1]" in llm.requests[-1]["messages"][-1]["content"]


def test_ask_continue(llm_api, llm):
    cut = cut_answer(llm_api, llm)
    assert len(cut["answer"]) == 64 and LONG.startswith(cut["answer"])
    llm.push({"text": "tice it [1]."})
    st, _, payload = llm_api.request("POST", f"/v1/ask/{cut['history_id']}/continue")
    events = sse_events(payload)
    assert st == 200 and events[-1][0] == "done"
    done = events[-1][1]
    assert done["answer"] == cut["answer"] + "tice it [1]." and done["continuations"] == 1
    assert done["finish_reason"] == "stop" and done["history_id"] == cut["history_id"]
    assert llm.requests[-1]["messages"][-2] == {"role": "assistant", "content": cut["answer"]}
    # finished now: it cannot be continued again
    e = err(llm_api.request("POST", f"/v1/ask/{cut['history_id']}/continue?stream=false"), 400)
    assert "cannot be continued" in e["message"]
    js = llm_api.ok("GET", f"/v1/history/{cut['history_id']}")
    assert js["answer"] == done["answer"] and js["continuations"] == 1 and js["state"] is None


def test_ask_continue_json_returns_the_whole_answer(llm_api, llm):
    cut = cut_answer(llm_api, llm)
    llm.push({"text": "tice it."})
    js = llm_api.ok("POST", f"/v1/ask/{cut['history_id']}/continue?stream=false")
    assert js["history_id"] == cut["history_id"] and js["finish_reason"] == "stop"
    assert js["answer"] == cut["answer"] + "tice it."


def test_ask_failure_mid_stream_is_an_error_event(llm_api, llm):
    llm.push({"status": 500})
    st, _, payload = llm_api.request("POST", "/v1/ask", {"query": "do cats purr?"})
    assert st == 200
    events = sse_events(payload)
    assert [e for e, _ in events][0] == "sources" and events[-1][0] == "error"
    error = events[-1][1]["error"]
    assert error["code"] == "provider" and error["message"]
    conform_events("/v1/ask", "post", events[-1:])
    assert API_KEY not in payload.decode()
    llm.push({"status": 500})
    e = err(llm_api.request("POST", "/v1/ask", {"query": "do cats purr?", "stream": False}), 502, "provider")
    assert API_KEY not in json.dumps(e)
    assert llm_api.server.app[STATE_KEY].answers_in_flight == 0


def test_client_disconnect_mid_stream_frees_the_slot(llm_api, llm):
    llm.push({"stall": True})  # the synthesis request never answers
    body = json.dumps({"query": "do cats purr?"}).encode()
    s = socket.create_connection(("127.0.0.1", llm_api.port), timeout=30)
    s.sendall((f"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1:{llm_api.port}\r\nAuthorization: Bearer {llm_api.token}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body)
    got = b""
    while b"event: sources" not in got:
        chunk = s.recv(65536)
        assert chunk, got
        got += chunk
    state = llm_api.server.app[STATE_KEY]
    assert state.answers_in_flight == 1
    s.close()
    wait_until(lambda: state.answers_in_flight == 0, 20, what="the answer slot to be released after the disconnect")
    assert llm_api.request("GET", "/v1/health", token=None)[0] == 200


# --------------------------------------------------------------------------- uploads
def test_upload_raw_and_multipart(fresh):
    up = Path(fresh.core.collections.upload_dir("notes"))
    st, _, body = fresh.request("POST", "/v1/collections/notes/documents?filename=hello%20world.txt",
                                raw=b"hello there, platypus", headers={"Content-Type": "application/octet-stream"})
    assert st == 200, body
    assert body == {"collection": "notes", "source_file": str(up / "hello world.txt"), "state": "queued",
                    "size_bytes": 21}
    assert (up / "hello world.txt").read_bytes() == b"hello there, platypus"
    mp, hdrs = _multipart("m.md", b"# Wombats\nWombats dig burrows.")
    body = fresh.ok("POST", "/v1/collections/notes/documents", raw=mp, headers=hdrs)
    assert body["source_file"] == str(up / "m.md") and body["size_bytes"] == len(b"# Wombats\nWombats dig burrows.")
    assert (up / "m.md").read_bytes() == b"# Wombats\nWombats dig burrows."
    fresh.wait_indexed({"hello world.txt", "m.md"})
    hits = fresh.ok("POST", "/v1/search", {"query": "wombats dig burrows"})["results"]
    assert hits[0]["filename"] == "m.md"


BAD_NAMES = ["../evil.txt", "..", ".", "a/b.txt", "/etc/passwd", "..\\evil.txt", "sub\\x.txt",
             "nul\x00.txt", "tab\t.txt", "x" * 256, " .. "]


def _tree(api) -> list[Path]:
    return sorted(api.paths.data.rglob("*")) + sorted(api.docs_dir.parent.glob("*"))


@pytest.mark.parametrize("name", BAD_NAMES)
def test_upload_rejects_path_tricks_raw(api, name):
    before = _tree(api)
    e = err(api.request("POST", f"/v1/collections/notes/documents?filename={quote(name)}", raw=b"x",
                        headers={"Content-Type": "application/octet-stream"}), 400, "bad_request")
    assert "name" in e["message"] or "filename" in e["message"]
    assert [p for p in _tree(api) if p.name.endswith("evil.txt") or p.name == "passwd"] == []
    assert {p for p in _tree(api) if "upload" in str(p)} <= set(before)


@pytest.mark.parametrize("disposition", ['filename="../evil.txt"', 'filename="a/b.txt"', 'filename=".."',
                                         "filename*=UTF-8''..%2F..%2Fevil.txt", 'filename="..\\\\evil.txt"'])
def test_upload_rejects_path_tricks_multipart(api, disposition):
    b = "B0UND"
    mp = (f"--{b}\r\nContent-Disposition: form-data; name=\"file\"; {disposition}\r\n\r\n"
          f"data\r\n--{b}--\r\n").encode()
    err(api.request("POST", "/v1/collections/notes/documents", raw=mp,
                    headers={"Content-Type": f"multipart/form-data; boundary={b}"}), 400)
    assert [p for p in _tree(api) if p.name.endswith("evil.txt") or p.name == "b.txt"] == []


@pytest.mark.parametrize("raw,ctype", [
    (b"garbage", "multipart/form-data; boundary=zz"),
    (b"--zz\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nx\r\n--zz--\r\n",
     "multipart/form-data; boundary=zz"),
    (b"--zz\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nx\r\n--zz--\r\n",
     "multipart/form-data; boundary=zz"),
    (b"x", "multipart/form-data"),
    (b"x", "application/octet-stream"),  # raw without ?filename=
])
def test_upload_bad_bodies(api, raw, ctype):
    err(api.request("POST", "/v1/collections/notes/documents", raw=raw, headers={"Content-Type": ctype}), 400)


def test_malformed_http_does_not_kill_the_server(api):
    for junk in (b"\x00\x01\x02\r\n\r\n", b"GET /v1/health HTTP/9.9\r\n\r\n",
                 b"GET " + b"a" * 20000 + b" HTTP/1.1\r\n\r\n"):
        status, _ = raw_http(api.port, junk)
        assert status in (0, 400, 403, 414, 431, 505)
    assert api.request("GET", "/v1/health", token=None)[0] == 200


# --------------------------------------------------------------------------- OpenAPI vs the routes
# The web UI's HTML pages (they answer HTML, not the API's JSON).
PAGES = {("GET", "/"), ("GET", "/login"), ("GET", "/ui/{asset}"), ("GET", "/favicon.ico")}


def _route_sets(app, doc) -> tuple[set, set]:
    from ragweedd.api.mcp_http import add_mcp_route

    documented = {(m.upper(), path) for path, ops in doc["paths"].items() for m in ops}
    registered = set()
    for route in app.router.routes():
        info = route.resource.get_info()
        registered.add((route.method, info.get("path") or info.get("formatter")))
    assert PAGES <= registered  # the web UI's pages are documented like the API's routes
    # /mcp is added by the daemon (an app of its own here: this one's router is frozen); it takes
    # every method and the SDK answers those MCP does not use
    from aiohttp import web

    probe = web.Application()
    add_mcp_route(probe, allow_writes=False)
    assert {(r.method, r.resource.get_info()["path"]) for r in probe.router.routes()} == {("*", "/mcp")}
    assert {m for m, p in documented if p == "/mcp"} == {"POST", "GET", "DELETE"}
    return registered, {(m, p) for m, p in documented if p != "/mcp"}


def test_openapi_matches_registered_routes(api):
    doc = api.ok("GET", "/v1/openapi.json")
    assert doc["openapi"].startswith("3.1") and doc["servers"][0]["url"] == f"http://127.0.0.1:{api.port}"
    assert {k: v for k, v in doc.items() if k != "servers"} == {k: v for k, v in DOC.items() if k != "servers"}
    registered, documented = _route_sets(api.server.app, doc)
    assert registered == documented
    for path, ops in doc["paths"].items():
        names = {seg[1:-1] for seg in path.split("/") if seg.startswith("{")}
        for op in ops.values():
            assert names == {p["name"] for p in op.get("parameters", []) if p["in"] == "path"}, path
            if path == "/mcp" and "200" not in op["responses"]:  # GET, DELETE: stateless, always 405
                assert set(op["responses"]) >= {"405"}
                continue
            assert op["operationId"] and op["responses"]["200"].get("content")


def test_openapi_route_check_can_fail(api):
    from ragweedd.api.app import build_app

    async def handler(request):
        return None

    app = build_app(api.engine, token="t" * 40, port=1)
    app.router.add_get("/v1/undocumented", handler, allow_head=False)
    app.router.add_put("/v1/status", handler)
    registered, documented = _route_sets(app, openapi.document())
    assert registered - documented == {("GET", "/v1/undocumented"), ("PUT", "/v1/status")}
    doc = openapi.document()
    del doc["paths"]["/v1/history"]
    registered, documented = _route_sets(build_app(api.engine, token="t" * 40, port=1), doc)
    assert registered - documented == {("GET", "/v1/history")}


def test_every_success_schema_is_a_closed_contract_object():
    """200 bodies are $refs into the contract's components, and those are closed objects, so a field
    the server adds or renames cannot pass unnoticed."""
    for path, ops in DOC["paths"].items():
        for method, op in ops.items():
            if path in ("/v1/openapi.json", "/mcp"):  # the document; JSON-RPC
                continue
            if "application/json" not in op["responses"]["200"]["content"]:  # files and pages
                assert path in ("/v1/files/{doc_key}", "/", "/login", "/ui/{asset}", "/favicon.ico"), path
                continue
            sch = op["responses"]["200"]["content"]["application/json"]["schema"]
            assert "$ref" in sch, (method, path)
            target = DOC["components"]["schemas"][sch["$ref"].rsplit("/", 1)[1]]
            assert target["additionalProperties"] is False, (method, path)


def test_an_unexpected_failure_is_a_500_envelope_without_internals(tmp_path, monkeypatch, store):
    """A bug inside the engine (here: status raising a plain RuntimeError) reaches the client as the
    documented envelope with the request id, never a traceback or a path."""
    with running_api(tmp_path, files={"a.txt": "alpha words"}, store=store) as a:
        def broken(*_a, **_k):
            raise RuntimeError(f"boom in {tmp_path}")

        monkeypatch.setattr(a.engine, "_status", broken)
        st, hdrs, body = a.request("GET", "/v1/status")
        e = err((st, hdrs, body), 500, "internal")
        conform("/v1/status", "get", 500, body)
        assert hdrs["X-Request-Id"] in e["hint"]
        assert "Traceback" not in json.dumps(body) and str(tmp_path) not in json.dumps(body)
        assert a.request("GET", "/v1/health", token=None)[0] == 200  # the daemon is still up
