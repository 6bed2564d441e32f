"""Every /v1 route against a real server backed by the FakeEngine: happy paths, the error envelope
for every bad input, SSE streaming, uploads, and the OpenAPI document versus the registered routes."""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fake_engine import FakeEngine  # noqa: E402
from ragweedd.api.security import STATE_KEY  # noqa: E402
from ragweedd.errors import EmbedderError, NotFoundError  # noqa: E402
from tests.api_support import raw_http, running_api  # noqa: E402


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    up = tmp_path_factory.mktemp("uploads")
    with running_api(tmp_path_factory.mktemp("routes"), FakeEngine(upload_dir=up), max_body_bytes=1 << 20) as a:
        a.upload_dir = up
        yield a


def _err(resp, status, code=None):
    st, hdrs, body = resp
    assert st == status, body
    assert set(body) == {"error"}, body
    assert {"code", "message"} <= set(body["error"]) and body["error"]["message"]
    if code:
        assert body["error"]["code"] == code
    return body["error"]


def sse_events(payload: bytes) -> list[tuple[str, dict]]:
    out = []
    for block in payload.decode().split("\n\n"):
        lines = [ln for ln in block.split("\n") if ln and not ln.startswith(":")]
        if not lines:
            continue
        ev = next(ln[6:].strip() for ln in lines if ln.startswith("event:"))
        data = json.loads("".join(ln[5:].strip() for ln in lines if ln.startswith("data:")))
        assert data["type"] == ev
        out.append((ev, data))
    return out


# --------------------------------------------------------------------------- basics
def test_health_and_status(api):
    st, _, body = api.request("GET", "/v1/health", token=None)
    assert st == 200 and body == {"ok": True, "version": "0.1.0"}
    st, hdrs, body = api.request("GET", "/v1/status")
    assert st == 200
    for key in ("collections", "files_by_state", "queue_depth", "ingest", "embedder", "index_sizes",
                "last_flush", "next_jobs", "degraded", "missing_tools"):
        assert key in body
    assert hdrs["Cache-Control"] == "no-store" and hdrs["X-Request-Id"]


def test_unknown_route_and_method(api):
    e = _err(api.request("GET", "/v1/nope"), 404, "not_found")
    assert "/v1/nope" in e["message"]
    _err(api.request("GET", "/"), 404, "not_found")
    st, hdrs, body = api.request("PUT", "/v1/status")
    e = _err((st, hdrs, body), 405, "method_not_allowed")
    assert "GET" in e["hint"] and hdrs["Allow"] == "GET"
    _err(api.request("DELETE", "/v1/search"), 405)


def test_collections_lifecycle(api, tmp_path):
    st, _, body = api.request("GET", "/v1/collections")
    assert st == 200 and [c["name"] for c in body["items"]] == ["notes"]
    st, _, body = api.request("POST", "/v1/collections", {"name": "papers", "paths": [str(tmp_path)],
                                                          "ignore": ["*.tmp"], "topic": "ml"})
    assert st == 200 and body["name"] == "papers" and body["ignore"] == ["*.tmp"]
    _err(api.request("POST", "/v1/collections", {"name": "papers", "paths": [str(tmp_path)]}), 400)
    for op in ("scan", "reanalyze", "rebuild-fts"):
        st, _, body = api.request("POST", f"/v1/collections/papers/{op}")
        assert st == 200 and body["queued"] is True
    st, _, body = api.request("DELETE", "/v1/collections/papers")
    assert st == 200
    e = _err(api.request("POST", "/v1/collections/papers/scan"), 404, "not_found")
    assert "papers" in e["message"] and e["hint"]
    _err(api.request("DELETE", "/v1/collections/papers"), 404)


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
    e = _err(api.request("POST", "/v1/collections", raw=json.dumps(body).encode(),
                         headers={"Content-Type": "application/json"}), 400, "bad_request")
    assert field in e["message"]


@pytest.mark.parametrize("raw,ctype,what", [
    (b"{not json", "application/json", "not valid JSON"),
    (b"\xff\xfe", "application/json", "not valid JSON"),
    (b"", "application/json", "not valid JSON"),
    (b'{"query": "x"}', "text/plain", "must be JSON"),
    (b'{"query": "x"}', "application/x-www-form-urlencoded", "must be JSON"),
])
def test_search_bad_encodings(api, raw, ctype, what):
    e = _err(api.request("POST", "/v1/search", raw=raw, headers={"Content-Type": ctype}), 400)
    assert what in e["message"]


@pytest.mark.parametrize("body", [
    {}, {"query": ""}, {"query": 5}, {"query": "x", "top_k": 0}, {"query": "x", "top_k": "3"},
    {"query": "x", "top_k": True}, {"query": "x", "collections": "notes"}, {"query": "x", "collections": ["a/b"]},
    {"query": "x", "file_type": "../pdf"}, {"query": "x", "stream": False}, {"query": "x" * 8001},
    {"query": "a\x00b"},
])
def test_search_bad_fields(api, body):
    _err(api.request("POST", "/v1/search", body), 400, "bad_request")


def test_search_and_filters(api):
    st, _, body = api.request("POST", "/v1/search", {"query": "HNSW graph neighbours"})
    assert st == 200 and body["results"] and body["history_id"]
    hit = body["results"][0]
    for key in ("embedding_id", "collection", "doc_id", "source_file", "filename", "text", "score",
                "rel_score", "page_label", "section", "span", "t_start", "t_end", "member"):
        assert key in hit
    assert hit["filename"] == "hnsw.md"
    st, _, body = api.request("POST", "/v1/search", {"query": "attention token", "file_type": "pdf", "top_k": 5})
    assert [h["filename"] for h in body["results"]] == ["attention.pdf"]
    st, _, body = api.request("POST", "/v1/search", {"query": "attention", "path_glob": "*.md"})
    assert body["results"] == []
    _err(api.request("POST", "/v1/search", {"query": "x", "collections": ["ghost"]}), 404)


def test_documents_listing_paging_and_show(api):
    st, _, body = api.request("GET", "/v1/documents?collection=notes&limit=2")
    assert st == 200 and len(body["items"]) == 2 and body["total"] >= 4
    st, _, page2 = api.request("GET", "/v1/documents?collection=notes&limit=2&offset=2")
    assert {d["doc_key"] for d in page2["items"]}.isdisjoint(d["doc_key"] for d in body["items"])
    st, _, failed = api.request("GET", "/v1/documents?state=failed")
    assert [d["filename"] for d in failed["items"]] == ["broken.pdf"] and failed["items"][0]["error"]
    st, _, doc = api.request("GET", f"/v1/documents/{failed['items'][0]['doc_key']}")
    assert doc["state"] == "failed" and doc["chunks_detail"] == []
    key = body["items"][0]["doc_key"]
    st, _, doc = api.request("GET", f"/v1/documents/{key}")
    assert st == 200 and doc["chunks_detail"][0]["text"]
    _err(api.request("GET", "/v1/documents/nope-0000"), 404, "not_found")


@pytest.mark.parametrize("query", ["limit=0", "limit=1001", "limit=x", "offset=-1", "offset=1e3",
                                   "state=broken", "collection=a%2Fb", "limit=99999999999999"])
def test_documents_bad_query(api, query):
    _err(api.request("GET", f"/v1/documents?{query}"), 400, "bad_request")


def test_history(api):
    _, _, s = api.request("POST", "/v1/search", {"query": "sqlite"})
    st, _, body = api.request("GET", "/v1/history?limit=5")
    assert st == 200 and body["items"][0]["id"] == s["history_id"]
    st, _, h = api.request("GET", f"/v1/history/{s['history_id']}")
    assert h["query"] == "sqlite" and h["kind"] == "search"
    _err(api.request("GET", "/v1/history/h999999"), 404)
    _err(api.request("GET", "/v1/history?offset=x"), 400)


# --------------------------------------------------------------------------- answers
def test_ask_streams_sse_in_order(api):
    st, hdrs, payload = api.request("POST", "/v1/ask", {"query": "hnsw sqlite"})
    assert st == 200 and hdrs["Content-Type"].startswith("text/event-stream")
    events = sse_events(payload)
    kinds = [e for e, _ in events]
    assert kinds[0] == "sources" and kinds[-1] == "done"
    assert set(kinds[1:-1]) <= {"annotation", "token"} and "token" in kinds
    answer = "".join(d["text"] for e, d in events if e == "token")
    assert "[1]" in answer and "[2]" in answer
    # the JSON form carries the same answer
    st, _, js = api.request("POST", "/v1/ask?stream=false", {"query": "hnsw sqlite"})
    assert st == 200 and js["answer"] == answer and len(js["sources"]) == 2 and js["history_id"]
    st, _, js2 = api.request("POST", "/v1/ask", {"query": "hnsw sqlite", "stream": False})
    assert js2["answer"] == answer and js2["finish_reason"] == "stop"


def test_ask_errors_before_stream_are_http_errors(api):
    _err(api.request("POST", "/v1/ask", {"query": "x", "collections": ["ghost"]}), 404, "not_found")
    _err(api.request("POST", "/v1/ask?stream=maybe", {"query": "x"}), 400)
    _err(api.request("POST", "/v1/ask/h424242/continue"), 404)
    api.engine.fail_with = EmbedderError("the embedder is not loaded", hint="wait for start-up")
    e = _err(api.request("POST", "/v1/ask", {"query": "x"}), 503, "embedder")
    assert e["hint"] == "wait for start-up"


def test_ask_continue(api):
    _, _, js = api.request("POST", "/v1/ask", {"query": "attention", "stream": False})
    st, hdrs, payload = api.request("POST", f"/v1/ask/{js['history_id']}/continue")
    assert st == 200 and [e for e, _ in sse_events(payload)][-1] == "done"
    st, _, js2 = api.request("POST", f"/v1/ask/{js['history_id']}/continue?stream=false")
    assert st == 200 and js2["answer"]


class _FailingEngine(FakeEngine):
    async def ask(self, query, **kw):
        async def gen():
            yield {"type": "sources", "sources": []}
            yield {"type": "token", "text": "Half an "}
            raise RuntimeError("provider exploded at /secret/path")
        return gen()


def test_ask_failure_mid_stream_is_an_error_event(tmp_path):
    with running_api(tmp_path, _FailingEngine()) as a:
        st, _, payload = a.request("POST", "/v1/ask", {"query": "x"})
        assert st == 200
        events = sse_events(payload)
        assert [e for e, _ in events] == ["sources", "token", "error"]
        assert events[-1][1]["error"]["code"] == "internal"
        assert b"/secret/path" not in payload
        e = _err(a.request("POST", "/v1/ask", {"query": "x", "stream": False}), 500, "internal")
        assert "/secret" not in json.dumps(e)
        assert a.server.app[STATE_KEY].answers_in_flight == 0


def test_client_disconnect_mid_stream_frees_the_slot(tmp_path):
    eng = FakeEngine(token_delay=0.2)
    with running_api(tmp_path, eng) as a:
        body = json.dumps({"query": "hnsw sqlite attention"}).encode()
        s = socket.create_connection(("127.0.0.1", a.port))
        s.sendall((f"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1:{a.port}\r\nAuthorization: Bearer {a.token}\r\n"
                   f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body)
        got = b""
        while b"event: sources" not in got:
            got += s.recv(65536)
        s.close()
        deadline = time.time() + 10
        while a.server.app[STATE_KEY].answers_in_flight or eng.answers_in_flight:
            assert time.time() < deadline, "answer slot not released after disconnect"
            time.sleep(0.05)
        assert a.request("GET", "/v1/health", token=None)[0] == 200


def test_unexpected_exception_is_500_without_internals(api):
    api.engine.fail_with = RuntimeError("sqlite3 at /home/alice/.secret/db exploded")
    st, hdrs, body = api.request("GET", "/v1/status")
    e = _err((st, hdrs, body), 500, "internal")
    assert "alice" not in json.dumps(body) and "Traceback" not in json.dumps(body)
    assert hdrs["X-Request-Id"] in e["hint"]
    api.engine.fail_with = NotFoundError("collection 'x' does not exist", hint="add it")
    _err(api.request("GET", "/v1/status"), 404, "not_found")
    assert api.request("GET", "/v1/status")[0] == 200


# --------------------------------------------------------------------------- uploads
def test_upload_raw_and_multipart(api):
    st, _, body = api.request("POST", "/v1/collections/notes/documents?filename=hello%20world.txt",
                              raw=b"hello there", headers={"Content-Type": "application/octet-stream"})
    assert st == 200 and body["filename"] == "hello world.txt" and body["size_bytes"] == 11
    assert (api.upload_dir / "notes" / "hello world.txt").read_bytes() == b"hello there"
    b = "BOUND"
    mp = (f"--{b}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"m.md\"\r\n"
          f"Content-Type: text/markdown\r\n\r\n# Title\nbody\r\n--{b}--\r\n").encode()
    st, _, body = api.request("POST", "/v1/collections/notes/documents", raw=mp,
                              headers={"Content-Type": f"multipart/form-data; boundary={b}"})
    assert st == 200 and body["filename"] == "m.md"
    assert (api.upload_dir / "notes" / "m.md").read_bytes() == b"# Title\nbody"


BAD_NAMES = ["../evil.txt", "..", ".", "a/b.txt", "/etc/passwd", "..\\evil.txt", "sub\\x.txt",
             "nul\x00.txt", "tab\t.txt", "x" * 256, " .. "]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_upload_rejects_path_tricks_raw(api, name):
    from urllib.parse import quote

    before = sorted(p for p in api.upload_dir.rglob("*"))
    e = _err(api.request("POST", f"/v1/collections/notes/documents?filename={quote(name)}", raw=b"x",
                         headers={"Content-Type": "application/octet-stream"}), 400, "bad_request")
    assert "name" in e["message"] or "filename" in e["message"]
    assert sorted(p for p in api.upload_dir.rglob("*")) == before
    assert not (api.upload_dir.parent / "evil.txt").exists()


@pytest.mark.parametrize("disposition", ['filename="../evil.txt"', 'filename="a/b.txt"', 'filename=".."',
                                         "filename*=UTF-8''..%2F..%2Fevil.txt", 'filename="..\\\\evil.txt"'])
def test_upload_rejects_path_tricks_multipart(api, disposition):
    b = "B0UND"
    mp = (f"--{b}\r\nContent-Disposition: form-data; name=\"file\"; {disposition}\r\n\r\n"
          f"data\r\n--{b}--\r\n").encode()
    before = sorted(api.upload_dir.rglob("*"))
    _err(api.request("POST", "/v1/collections/notes/documents", raw=mp,
                     headers={"Content-Type": f"multipart/form-data; boundary={b}"}), 400)
    assert sorted(api.upload_dir.rglob("*")) == before


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
    _err(api.request("POST", "/v1/collections/notes/documents", raw=raw, headers={"Content-Type": ctype}), 400)


def test_upload_unknown_collection(api):
    _err(api.request("POST", "/v1/collections/ghost/documents?filename=a.txt", raw=b"x",
                     headers={"Content-Type": "application/octet-stream"}), 404)


def test_malformed_http_does_not_kill_the_server(api):
    for junk in (b"\x00\x01\x02\r\n\r\n", b"GET /v1/health HTTP/9.9\r\n\r\n",
                 b"GET " + b"a" * 20000 + b" HTTP/1.1\r\n\r\n"):
        status, _ = raw_http(api.port, junk)
        assert status in (0, 400, 403, 414, 431, 505)
    assert api.request("GET", "/v1/health", token=None)[0] == 200


# --------------------------------------------------------------------------- OpenAPI
def _route_sets(app, doc) -> tuple[set, set]:
    documented = {(m.upper(), path) for path, ops in doc["paths"].items() for m in ops}
    registered = set()
    for route in app.router.routes():
        info = route.resource.get_info()
        registered.add((route.method, info.get("path") or info.get("formatter")))
    return registered, documented


def test_openapi_matches_registered_routes(api):
    st, _, doc = api.request("GET", "/v1/openapi.json")
    assert st == 200 and doc["openapi"].startswith("3.1")
    assert doc["servers"][0]["url"] == f"http://127.0.0.1:{api.port}"
    registered, documented = _route_sets(api.server.app, doc)
    assert registered == documented
    # every path parameter in a route is documented as a parameter
    for path, ops in doc["paths"].items():
        names = {seg[1:-1] for seg in path.split("/") if seg.startswith("{")}
        for op in ops.values():
            assert names == {p["name"] for p in op.get("parameters", []) if p["in"] == "path"}, path
            assert op["operationId"] and op["responses"]


def test_openapi_route_check_can_fail():
    from ragweedd.api.app import build_app
    from ragweedd.api.openapi import document

    async def handler(request):
        return None

    app = build_app(FakeEngine(), token="t" * 40, port=1)
    app.router.add_get("/v1/undocumented", handler, allow_head=False)
    app.router.add_put("/v1/status", handler)
    registered, documented = _route_sets(app, document())
    assert registered - documented == {("GET", "/v1/undocumented"), ("PUT", "/v1/status")}
    doc = document()
    del doc["paths"]["/v1/history"]
    registered, documented = _route_sets(build_app(FakeEngine(), token="t" * 40, port=1), doc)
    assert registered - documented == {("GET", "/v1/history")}


class _GeneratorEngine(FakeEngine):
    """An engine whose ask is a plain async generator function (the protocol allows both forms)."""

    async def ask(self, query, **kw):  # noqa: D401 - async generator, not a coroutine
        yield {"type": "sources", "sources": []}
        yield {"type": "token", "text": "plain "}
        yield {"type": "token", "text": "generator"}
        yield {"type": "done", "history_id": "h1", "finish_reason": "stop"}


def test_engine_ask_may_be_a_plain_async_generator(tmp_path):
    with running_api(tmp_path, _GeneratorEngine()) as a:
        st, _, payload = a.request("POST", "/v1/ask", {"query": "x"})
        assert st == 200 and [e for e, _ in sse_events(payload)] == ["sources", "token", "token", "done"]
        st, _, js = a.request("POST", "/v1/ask", {"query": "x", "stream": False})
        assert js["answer"] == "plain generator" and js["history_id"] == "h1"
