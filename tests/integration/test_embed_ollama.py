"""OllamaEmbedder against a local HTTP server that speaks Ollama's wire format."""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from ragweedd.embed.hashing import HashEmbedder
from ragweedd.embed.long import embed_texts
from ragweedd.embed.ollama import OllamaEmbedder
from ragweedd.errors import EmbedderError

DIGEST = "sha256:0a109f422b47e3a30ba2b10eca18548e944e8a23073ee3f3e947efcf3c45e59f"


class FakeOllama(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, *, legacy=False, models=None, tags=True):
        super().__init__(("127.0.0.1", 0), Handler)
        self.legacy = legacy
        self.models = {"nomic-embed-text:latest": DIGEST} if models is None else models
        self.tags = tags
        self.requests: list[tuple[str, dict]] = []
        self.vec = HashEmbedder(24)
        self.override = None  # callable(path, body) -> (status, body) to simulate faults

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"

    def known(self, name):
        return name in self.models or f"{name}:latest" in self.models


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def _send(self, status, body, raw=False):
        data = body.encode() if raw else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain" if raw else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        srv = self.server
        srv.requests.append((self.path, {}))
        if self.path == "/api/tags" and srv.tags:
            return self._send(200, {"models": [{"name": n, "model": n, "digest": d.split(":")[1], "size": 1}
                                               for n, d in srv.models.items()]})
        self._send(404, "404 page not found", raw=True)

    def do_POST(self):
        srv = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        srv.requests.append((self.path, body))
        if srv.override:
            hit = srv.override(self.path, body)
            if hit:
                return self._send(*hit)
        if self.path == "/api/embed" and not srv.legacy:
            if not srv.known(body["model"]):
                return self._send(404, {"error": f"model \"{body['model']}\" not found, try pulling it first"})
            raw = srv.vec.embed_batch(body["input"]) * 3.0  # servers need not normalise
            return self._send(200, {"model": body["model"], "embeddings": raw.tolist()})
        if self.path == "/api/embeddings":
            if not srv.known(body["model"]):
                return self._send(404, {"error": f"model '{body['model']}' not found, try pulling it first"})
            return self._send(200, {"embedding": (srv.vec.embed_batch([body["prompt"]])[0] * 5).tolist()})
        self._send(404, "404 page not found", raw=True)


@pytest.fixture
def server():
    made = []

    def start(**kw):
        srv = FakeOllama(**kw)
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        made.append(srv)
        return srv

    yield start
    for s in made:
        s.shutdown()
        s.server_close()


def test_batched_embed(server):
    srv = server()
    e = OllamaEmbedder("nomic-embed-text", srv.url)
    texts = ["alpha beta", "gamma delta", "alpha beta gamma"]
    v = e.embed_batch(texts)
    assert v.shape == (3, 24) and v.dtype == np.float32 and e.dim == 24
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(v, srv.vec.embed_batch(texts), atol=1e-5)
    posts = [(p, b) for p, b in srv.requests if p.startswith("/api/embed")]
    assert len(posts) == 1
    path, body = posts[0]
    assert path == "/api/embed" and body["model"] == "nomic-embed-text" and body["input"] == texts
    assert body["options"] == {"num_ctx": 8192}
    assert e.id == f"ollama:nomic-embed-text@{DIGEST.split(':')[1][:12]}"


def test_dimension_from_first_call(server):
    srv = server()
    e = OllamaEmbedder("nomic-embed-text", srv.url)
    assert e.dim == 24
    assert srv.requests[-1][1]["input"] == ["dimension probe"]


def test_old_server_falls_back_to_api_embeddings(server):
    srv = server(legacy=True)
    e = OllamaEmbedder("nomic-embed-text", srv.url)
    v = e.embed_batch(["one", "two"])
    np.testing.assert_allclose(v, srv.vec.embed_batch(["one", "two"]), atol=1e-5)
    paths = [p for p, _ in srv.requests]
    assert paths == ["/api/embed", "/api/embeddings", "/api/embeddings"]
    assert srv.requests[1][1] == {"model": "nomic-embed-text", "prompt": "one", "options": {"num_ctx": 8192}}
    e.embed_batch(["three"])  # remembered: no second try of /api/embed
    assert [p for p, _ in srv.requests][3:] == ["/api/embeddings"]


def test_missing_model_says_ollama_pull(server):
    srv = server(models={"other:latest": DIGEST})
    e = OllamaEmbedder("mxbai-embed-large", srv.url)
    with pytest.raises(EmbedderError) as ei:
        e.embed_batch(["x"])
    msg = str(ei.value)
    assert "ollama pull mxbai-embed-large" in msg and srv.url in msg and "mxbai-embed-large" in msg
    with pytest.raises(EmbedderError, match="ollama pull mxbai-embed-large"):
        _ = e.id
    # An old server reports a missing model too, on its own endpoint.
    old = server(legacy=True, models={})
    with pytest.raises(EmbedderError, match="ollama pull"):
        OllamaEmbedder("nomic-embed-text", old.url).embed_batch(["x"])


def test_server_down():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    e = OllamaEmbedder("nomic-embed-text", f"http://127.0.0.1:{port}", timeout_s=2)
    with pytest.raises(EmbedderError) as ei:
        e.embed_batch(["x"])
    assert f"127.0.0.1:{port}" in str(ei.value) and "ollama serve" in str(ei.value)


def test_server_error_is_reported(server):
    srv = server()
    srv.override = lambda path, body: (500, {"error": "llama runner process has terminated"})
    with pytest.raises(EmbedderError, match="HTTP 500.*llama runner process has terminated"):
        OllamaEmbedder("nomic-embed-text", srv.url).embed_batch(["x"])


@pytest.mark.parametrize("reply,match", [
    ((200, "<html>not ollama</html>", True), "not JSON"),
    ((200, {"embeddings": [[0.1, 0.2]]}), "1 embeddings for 2 texts"),
    ((200, {"embeddings": [[0.1, 0.2], [0.3]]}), "unequal length"),
    ((200, {"embeddings": [[0.0, 0.0], [1.0, 0.0]]}), "all-zero"),
    ((200, {"embeddings": [[], []]}), "malformed"),
    ((200, {"embeddings": [["a", "b"], [1, 2]]}), "non-numbers"),
    ((200, {"result": 1}), "without 'embeddings'"),
])
def test_malformed_replies(server, reply, match):
    srv = server()
    srv.override = lambda path, body: reply
    with pytest.raises(EmbedderError, match=match):
        OllamaEmbedder("nomic-embed-text", srv.url).embed_batch(["a", "b"])


def test_dimension_change_is_an_error(server):
    srv = server()
    e = OllamaEmbedder("nomic-embed-text", srv.url)
    e.embed_batch(["a"])
    srv.override = lambda path, body: (200, {"embeddings": [[1.0, 2.0]]})
    with pytest.raises(EmbedderError, match="now returns 2-d vectors, earlier 24-d"):
        e.embed_batch(["b"])


def test_without_tags_endpoint_id_is_the_name(server):
    srv = server(tags=False)
    assert OllamaEmbedder("nomic-embed-text", srv.url).id == "ollama:nomic-embed-text"


def test_digest_changes_id(server):
    a = server(models={"nomic-embed-text:latest": "sha256:" + "1" * 64})
    b = server(models={"nomic-embed-text:latest": "sha256:" + "2" * 64})
    assert OllamaEmbedder("nomic-embed-text", a.url).id != OllamaEmbedder("nomic-embed-text", b.url).id


def test_embed_texts_splits_for_short_context_models(server):
    srv = server(models={"mxbai-embed-large:latest": DIGEST})
    e = OllamaEmbedder("mxbai-embed-large", srv.url)
    text = "word " * 1000  # 5,000 chars: over 512 tokens at 4 chars/token
    v = embed_texts(e, [text, "short"])
    assert v.shape == (2, 24)
    sent = [t for p, b in srv.requests if p == "/api/embed" for t in b["input"]]
    assert len(sent) >= 4 and all(len(t) <= 2048 for t in sent)


@pytest.mark.parametrize("name", ["", " nomic", "nomic "])
def test_bad_model_name(name):
    with pytest.raises(EmbedderError):
        OllamaEmbedder(name)


def test_non_text_input(server):
    srv = server()
    with pytest.raises(EmbedderError, match="text #0 is dict"):
        OllamaEmbedder("nomic-embed-text", srv.url).embed_batch([{}])


def test_oneshot_ingest_says_when_the_embedder_failed_and_a_second_run_finishes(server, tmp_path):
    """`ragweedd ingest` publishes every file, then the embedder dies half-way: the command fails
    (exit 1) naming the chunks still without a vector; run again with the server back, it computes
    exactly those."""
    import sqlite3
    import subprocess
    import sys
    from contextlib import closing

    srv = server()
    calls = {"n": 0}

    def flaky(path, body):
        if path == "/api/embed":
            calls["n"] += 1
            if calls["n"] > 3:
                return 500, {"error": "model runner crashed (test)"}
        return None

    srv.override = flaky
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(12):
        (docs / f"note_{i}.md").write_text("\n\n".join(f"Note {i} line {k} about herons and kingfishers."
                                                      for k in range(30)))
    cfg = tmp_path / "ragweedd.toml"
    cfg.write_text(f'chunk_size = 64\ndata_dir = "{tmp_path / "data"}"\nstate_dir = "{tmp_path / "state"}"\n'
                   f'cache_dir = "{tmp_path / "cache"}"\n[embed]\nmodel = "ollama:nomic-embed-text"\n'
                   f'ollama_url = "{srv.url}"\nbatch_size = 4\n[collections.notes]\npaths = ["{docs}"]\n')
    argv = [sys.executable, "-m", "ragweedd", "--config", str(cfg), "ingest", "-c", "notes"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "have no vector yet" in r.stderr and "model runner crashed" in r.stderr, r.stderr
    rag = tmp_path / "data" / "collections" / "notes" / "rag.sqlite3"
    with closing(sqlite3.connect(rag)) as c:
        chunks = c.execute("SELECT count(*) FROM embeddings").fetchone()[0]
        pending = c.execute("SELECT count(*) FROM pending_vectors").fetchone()[0]
    assert chunks > 12 * 2 and 0 < pending < chunks  # every file published; some vectors written
    srv.override = None
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert f"{pending} embedded" in r.stdout, r.stdout
    with closing(sqlite3.connect(rag)) as c:
        assert c.execute("SELECT count(*) FROM pending_vectors").fetchone()[0] == 0
        assert c.execute("SELECT count(*) FROM vectors").fetchone()[0] == chunks
