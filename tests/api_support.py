"""Helpers for the API and ragweedctl tests: the REAL daemon engine behind a real HTTP server.

``running_api(tmp_path)`` writes a config in ``tmp_path`` (data/state/cache dirs, one collection
``notes`` over a folder of real text, Markdown and HTML files, the hash embedder, a free loopback
port), builds the daemon with ``ragweedd.services.open_daemon`` (real SQLite files or, with
``store=``, a real PostgreSQL; real ingest threads, real watcher), starts it without the
scheduler, serves ``DaemonEngine(core)`` with ``ApiServer`` on a background thread's event loop
(``ThreadedServer``), waits until every file is indexed, and yields an ``Api`` client. On exit
the server stops, then ``core.stop()``.

There is no fake engine: the faces are tested against what users run (DESIGN §14).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from aiohttp import web

from ragweedd.api.server import ApiServer, ensure_token
from ragweedd.config import load_config
from ragweedd.engine import DaemonEngine
from ragweedd.paths import Paths
from ragweedd.services import open_daemon
from tests.tools import wait_until  # noqa: F401 - the API tests import it from here

ENGINE_METHODS = ("status", "list_collections", "add_collection", "remove_collection", "scan", "reanalyze",
                  "rebuild_fts", "list_documents", "get_document", "source_file", "upload", "search", "ask",
                  "ask_continue", "history_list", "history_show", "conversations_list", "conversation_show",
                  "conversation_delete")

# Real documents of three formats; each has words the others lack, so searches can tell them apart.
DOCS: dict[str, str] = {
    "hnsw.md": "# HNSW graphs\n\nA hierarchical navigable small world graph finds nearest neighbours "
               "by greedy search through layers of a proximity graph.\n\n## Parameters\n\n"
               "The ef parameter trades recall for speed; M bounds the neighbours per node.\n",
    "sqlite.txt": "SQLite full text search uses the FTS5 module. Ranking is BM25 and the porter "
                  "tokenizer stems English words. Keyword search complements vector search.\n",
    "attention.html": "<!doctype html><html><head><title>Attention</title></head><body>"
                      "<h1>Attention</h1><p>The transformer attention mechanism weighs every token "
                      "against every other token of the sequence.</p>"
                      "<h2>Heads</h2><p>Multi-head attention runs several attention functions in "
                      "parallel.</p></body></html>\n",
    "cats.md": "# Cats\n\nCats purr when they are content. A purring cat is usually relaxed.\n",
}


class ThreadedServer:
    """``with ThreadedServer(DaemonEngine(core), token=t) as srv: srv.port``: the daemon's ApiServer on
    a private event loop in a background thread, so a test gets a real HTTP server on a free port
    without owning an event loop."""

    def __init__(self, engine, *, token: str, **kwargs) -> None:
        self.engine, self.token, self.kwargs = engine, token, kwargs
        self.loop = asyncio.new_event_loop()
        self.server: ApiServer | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="ragweedd-api")

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.port

    @property
    def app(self) -> web.Application:
        assert self.server is not None
        return self.server.app

    def start(self) -> "ThreadedServer":
        self._thread.start()

        async def _start():
            self.server = ApiServer(self.engine, token=self.token, **self.kwargs)
            await self.server.start()

        asyncio.run_coroutine_threadsafe(_start(), self.loop).result(30)
        return self

    def stop(self) -> None:
        if self.server is not None:
            asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    def __enter__(self) -> "ThreadedServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def API_KEY_LLM_TOML(llm) -> str:  # noqa: N802 - reads like the constant it stands for
    """An ``[llm]`` section whose synthesis is the OpenAI SDK against tests/fakes/llm_server.py."""
    from tests.fakes.llm_server import API_KEY

    return "\n".join(["[llm]", 'synthesis = "openai:test-model"', f'openai_base_url = "{llm.url}/v1"',
                      f'openai_api_key = "{API_KEY}"', "max_retries = 0", "timeout_s = 20"])


@dataclass
class Api:
    server: ThreadedServer
    core: Any  # ragweedd.daemon_core.Core
    engine: DaemonEngine
    token: str
    paths: Paths
    docs_dir: Path
    cfg_file: Path
    files: dict[str, str | bytes] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    store: str | None = None  # the PostgreSQL URI the daemon keeps its index in (None: SQLite files)

    def probe(self):
        """What the daemon stored, read straight from its backend (tests/system/state_probe.py)."""
        from tests.system.state_probe import PgProbe, SqliteProbe

        return PgProbe(self.store, "laptop") if self.store else SqliteProbe(self.paths.data)

    def count_engine_calls(self) -> list[str]:
        """Record the name of every engine method the routes call (the real engine, instrumented),
        so a test can prove a refused request never reached it."""
        for name in ENGINE_METHODS:
            f = getattr(self.engine, name)

            async def counted(*a, _f=f, _n=name, **k):
                self.calls.append(_n)
                return await _f(*a, **k)

            setattr(self.engine, name, counted)
        return self.calls

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def state_dir(self) -> Path:
        return self.paths.state

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def request(self, method: str, path: str, body=None, *, headers: dict | None = None,
                token: str | None | bool = True, raw: bytes | None = None, timeout: float = 30):
        """(status, headers, parsed JSON body or bytes). token=True sends the right token, a
        string sends that, None/False sends none."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {}
        if token is True:
            h["Authorization"] = f"Bearer {self.token}"
        elif token:
            h["Authorization"] = f"Bearer {token}"
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        try:
            conn.request(method, path, body=data, headers=h)
            resp = conn.getresponse()
            payload = resp.read()
        finally:
            conn.close()
        if resp.getheader("Content-Type", "").startswith("application/json"):
            return resp.status, dict(resp.getheaders()), json.loads(payload)
        return resp.status, dict(resp.getheaders()), payload

    def ok(self, method: str, path: str, body=None, **kw) -> Any:
        """The JSON body of a request that must succeed."""
        st, _, out = self.request(method, path, body, **kw)
        assert st == 200, (method, path, st, out)
        return out

    def status(self) -> dict:
        return self.ok("GET", "/v1/status")

    def idle(self) -> bool:
        s = self.status()
        q = s["queue"]
        return not (q["queued"] or q["running"] or q["debouncing"] or s["ingest"]["running"]
                    or s["vectors"]["pending_chunks"] or s["vectors"]["running"])

    def indexed(self, collection: str = "notes") -> dict[str, dict]:
        """Documents of the collection that are indexed, by file name."""
        page = self.ok("GET", f"/v1/documents?collection={collection}&state=indexed&limit=1000")
        return {d["filename"]: d for d in page["items"]}

    def wait_indexed(self, names, collection: str = "notes", timeout: float = 60) -> None:
        """Until every file in ``names`` is indexed and the queue is idle (polled over the API)."""
        want = set(names)
        wait_until(lambda: want <= set(self.indexed(collection)) and self.idle(), timeout,
                   what=f"{sorted(want)} indexed in '{collection}' and the queue idle")

    def write_file(self, name: str, text: str) -> Path:
        p = self.docs_dir / name
        p.write_text(text, encoding="utf-8")
        return p


def write_config(base: Path, docs_dir: Path, *, top: str = "", extra: str = "", store: str | None = None,
                 source_name: str = "laptop") -> Path:
    """``top``: top-level keys; ``extra``: whole sections (e.g. ``[llm]``); ``store``: a PostgreSQL
    URI to keep the index in (written with ``source_name``), else the data directory's SQLite files."""
    cfg = base / "ragweedd.toml"
    if store is not None:
        top = "\n".join([f"store = {json.dumps(store)}", f"source_name = {json.dumps(source_name)}", top])
    lines = ['listen = "127.0.0.1:0"', f'data_dir = "{base / "data"}"', f'state_dir = "{base / "state"}"',
             f'cache_dir = "{base / "cache"}"', "debounce_s = 0.2", "delete_hold_s = 0.2", "ingest_nice = 0",
             top, extra, "[embed]", 'model = "hash:64"', "[collections.notes]", f'paths = ["{docs_dir}"]']
    cfg.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return cfg


@contextlib.contextmanager
def running_api(tmp_path: Path, *, files: dict[str, str | bytes] | None = None, extra_toml: str = "",
                top_toml: str = "",
                expect: set[str] | None = None, extract: Callable | None = None,
                max_body_bytes: int | None = None, max_concurrent_answers: int | None = None,
                wait: bool = True, timeout: float = 90, scheduler: bool = True,
                server_kwargs: dict | None = None, store: str | None = None):
    """The real daemon (open_daemon + DaemonEngine) behind ApiServer on a free loopback port.

    ``store``: a PostgreSQL URI the daemon keeps its index in (config ``store``, with
    ``source_name = "laptop"``); None for the data directory's SQLite files.

    ``scheduler`` is on by default, as ``ragweedd run`` has it (its jobs are hours apart, so they
    never run during a test); see test_api_contract for what a core started without it does.
    ``server_kwargs`` go to ApiServer (its timeouts, for instance)."""
    files = DOCS if files is None else files
    docs = tmp_path / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        if isinstance(content, bytes):
            (docs / name).write_bytes(content)
        else:
            (docs / name).write_text(content, encoding="utf-8")
    cfg_file = write_config(tmp_path, docs, top=top_toml, extra=extra_toml, store=store)
    cfg = load_config(cfg_file, env={})
    paths = Paths.from_config(cfg).ensure()
    token = ensure_token(paths.token_file)
    core = open_daemon(cfg, extract=extract)
    core.start(scheduler=scheduler)
    server = None
    try:
        engine = DaemonEngine(core)
        server = ThreadedServer(
            engine, token=token, listen=cfg.listen, port_file=paths.port_file,
            max_body_bytes=max_body_bytes or cfg.max_body_mb * 2**20,
            max_concurrent_answers=max_concurrent_answers or cfg.max_concurrent_answers,
            **(server_kwargs or {})).start()
        api = Api(server, core, engine, token, paths, docs, cfg_file, dict(files), store=store)
        want = set(files) if expect is None else expect
        if wait and want:
            api.wait_indexed(want, timeout=timeout)
        yield api
    finally:
        try:
            if server is not None:
                server.stop()
        finally:
            core.stop()


def raw_http(port: int, request: bytes, timeout: float = 5.0) -> tuple[int, bytes]:
    """Send exactly these bytes (odd Host headers etc.); returns (status, whole response)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        chunks = []
        while True:
            try:
                b = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not b:
                break
            chunks.append(b)
    data = b"".join(chunks)
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    return status, data


def body_json(response: bytes) -> dict:
    """Body of a raw Content-Length JSON response."""
    return json.loads(response.split(b"\r\n\r\n", 1)[1])


def sse_events(payload: bytes) -> list[tuple[str, dict]]:
    """(event name, data) of every event in an SSE body; checks that data.type names the event."""
    out = []
    for block in payload.decode().split("\n\n"):
        lines = [ln for ln in block.split("\n") if ln and not ln.startswith(":")]
        if not lines:
            continue
        ev = next(ln[6:].strip() for ln in lines if ln.startswith("event:"))
        data = json.loads("".join(ln[5:].strip() for ln in lines if ln.startswith("data:")))
        assert data["type"] == ev, (ev, data)
        out.append((ev, data))
    return out
