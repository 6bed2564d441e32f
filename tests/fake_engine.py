"""An in-memory Engine for tests of the API, ragweedctl and launchers.

It behaves plausibly rather than exactly: a few documents in a ``notes`` collection, search by
case-insensitive word match, answers streamed word by word with ``[N]`` citations, a history.
Knobs tests use: ``token_delay`` (seconds between streamed tokens, to hold answers open), and
``fail_with`` (an exception the next engine call raises, to test the error envelope).
"""

from __future__ import annotations

import asyncio
import fnmatch
import itertools
import re
import time
from pathlib import Path
from typing import Any, AsyncIterator

from ragweedd.errors import NotFoundError, RequestError

_SAMPLE_DOCS = [
    ("notes", "/home/user/Notes/hnsw.md", "HNSW is a graph index for approximate nearest neighbour "
     "search. It links each vector to its closest neighbours on several layers.", None, "Indexes"),
    ("notes", "/home/user/Notes/sqlite.md", "SQLite FTS5 provides full text search with the porter "
     "tokenizer and bm25 ranking.", None, "Keyword search"),
    ("notes", "/home/user/Notes/papers/attention.pdf", "Attention lets a model weigh every token "
     "of the input when it writes the next one.", "3", None),
    ("notes", "/home/user/Notes/broken.pdf", "", None, None),
]


class FakeEngine:
    def __init__(self, *, token_delay: float = 0.0, upload_dir: str | Path | None = None,
                 docs: bool = True) -> None:
        self.token_delay = token_delay
        self.upload_dir = Path(upload_dir) if upload_dir else None
        self.fail_with: BaseException | None = None
        self.calls: list[tuple[str, tuple]] = []
        self._ids = itertools.count(1)
        self.collections: dict[str, dict[str, Any]] = {}
        self.docs: dict[str, dict[str, Any]] = {}
        self.history: dict[str, dict[str, Any]] = {}
        self.answers_in_flight = 0
        self.max_answers_in_flight = 0
        if docs:
            self.collections["notes"] = {"name": "notes", "paths": ["/home/user/Notes"], "ignore": [],
                                         "topic": "personal notes", "available": True}
            for coll, path, text, page, section in _SAMPLE_DOCS:
                self._add_doc(coll, path, text, page=page, section=section,
                              state="indexed" if text else "failed",
                              error=None if text else "pypdf: EOF marker not found")

    # ----------------------------------------------------------------- helpers
    def _add_doc(self, coll, path, text, *, page=None, section=None, state="indexed", error=None):
        n = next(self._ids)
        key = f"{coll}-{n:04d}"
        self.docs[key] = {
            "doc_key": key, "collection": coll, "source_file": path, "filename": Path(path).name,
            "state": state, "size_bytes": len(text.encode()), "chunks": 1 if text else 0,
            "error": error, "updated_at": "2024-05-01T12:00:00Z", "_text": text, "_page": page,
            "_section": section,
        }
        return key

    def _check(self, name: str, *args) -> None:
        self.calls.append((name, args))
        if self.fail_with is not None:
            exc, self.fail_with = self.fail_with, None
            raise exc

    def _coll(self, name: str) -> dict[str, Any]:
        if name not in self.collections:
            raise NotFoundError(f"collection {name!r} does not exist",
                                hint="list collections with GET /v1/collections")
        return self.collections[name]

    @staticmethod
    def _public(doc: dict) -> dict:
        return {k: v for k, v in doc.items() if not k.startswith("_")}

    def _hits(self, query, collections, top_k, path_glob, file_type, doc_id) -> list[dict]:
        for c in collections or []:
            self._coll(c)
        words = [w for w in re.findall(r"\w+", query.lower()) if len(w) > 2]
        hits = []
        for key, d in self.docs.items():
            if d["state"] != "indexed" or (collections and d["collection"] not in collections):
                continue
            if path_glob and not fnmatch.fnmatch(d["source_file"], path_glob):
                continue
            if file_type and not d["filename"].lower().endswith("." + file_type.lower().lstrip(".")):
                continue
            if doc_id and key != doc_id:
                continue
            text = d["_text"].lower()
            found = sum(1 for w in words if w in text)
            if found:
                hits.append((found / max(len(words), 1), key, d))
        hits.sort(key=lambda h: (-h[0], h[1]))
        hits = hits[: top_k or 64]
        if not hits:
            return []
        hi, lo = hits[0][0], hits[-1][0]
        out = []
        for score, key, d in hits:
            out.append({
                "embedding_id": f"{key}-0", "collection": d["collection"], "doc_id": key,
                "source_file": d["source_file"], "filename": d["filename"], "text": d["_text"],
                "score": round(score, 4), "rel_score": 1.0 if hi == lo else round((score - lo) / (hi - lo), 4),
                "page_label": d["_page"], "section": d["_section"], "span": [0, len(d["_text"])],
                "t_start": None, "t_end": None, "member": None,
            })
        return out

    def _new_history(self, kind: str, query: str, **extra) -> str:
        hid = f"h{next(self._ids)}"
        self.history[hid] = {"id": hid, "kind": kind, "query": query,
                             "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **extra}
        return hid

    # ----------------------------------------------------------------- Engine
    async def status(self) -> dict[str, Any]:
        self._check("status")
        by_state: dict[str, int] = {}
        for d in self.docs.values():
            by_state[d["state"]] = by_state.get(d["state"], 0) + 1
        return {
            "version": "fake",
            "collections": [{"name": c["name"], "documents": sum(1 for d in self.docs.values()
                                                                  if d["collection"] == c["name"]),
                             "available": c["available"]} for c in self.collections.values()],
            "files_by_state": by_state, "queue_depth": 0,
            "ingest": {"running": False, "done": len(self.docs), "total": len(self.docs)},
            "embedder": {"id": "hash:384", "dim": 384},
            "index_sizes": {c: sum(1 for d in self.docs.values() if d["collection"] == c)
                            for c in self.collections},
            "last_flush": "2024-05-01T12:00:00Z",
            "next_jobs": [{"name": "cluster_reanalysis", "at": "2024-05-02T03:00:00+00:00"}],
            "degraded": [], "missing_tools": [],
        }

    async def list_collections(self) -> list[dict[str, Any]]:
        self._check("list_collections")
        return [{**c, "documents": sum(1 for d in self.docs.values() if d["collection"] == n)}
                for n, c in self.collections.items()]

    async def add_collection(self, name, paths, ignore=None, topic=""):
        self._check("add_collection", name, paths, ignore, topic)
        if name in self.collections:
            raise RequestError(f"collection {name!r} already exists",
                               hint="remove it first or choose another name")
        self.collections[name] = {"name": name, "paths": list(paths), "ignore": list(ignore or []),
                                  "topic": topic, "available": True}
        return {**self.collections[name], "documents": 0}

    async def remove_collection(self, name):
        self._check("remove_collection", name)
        self._coll(name)
        del self.collections[name]
        for key in [k for k, d in self.docs.items() if d["collection"] == name]:
            del self.docs[key]
        return {"removed": name}

    async def scan(self, name):
        self._check("scan", name)
        self._coll(name)
        return {"collection": name, "queued": True, "job": "scan"}

    async def reanalyze(self, name):
        self._check("reanalyze", name)
        self._coll(name)
        return {"collection": name, "queued": True, "job": "reanalyze"}

    async def rebuild_fts(self, name):
        self._check("rebuild_fts", name)
        self._coll(name)
        return {"collection": name, "queued": True, "job": "rebuild_fts"}

    async def list_documents(self, collection=None, state=None, path_glob=None, offset=0, limit=50):
        self._check("list_documents", collection, state, path_glob, offset, limit)
        if collection:
            self._coll(collection)
        items = [self._public(d) for d in self.docs.values()
                 if (not collection or d["collection"] == collection)
                 and (not state or d["state"] == state)
                 and (not path_glob or fnmatch.fnmatch(d["source_file"], path_glob))]
        return {"items": items[offset: offset + limit], "total": len(items)}

    async def get_document(self, doc_key):
        self._check("get_document", doc_key)
        d = self.docs.get(doc_key)
        if d is None:
            raise NotFoundError(f"document {doc_key!r} does not exist",
                                hint="list documents with GET /v1/documents")
        detail = [] if not d["_text"] else [{
            "chunk_idx": 0, "text": d["_text"], "page_label": d["_page"], "section": d["_section"],
            "span": [0, len(d["_text"])], "t_start": None, "t_end": None}]
        return {**self._public(d), "chunks_detail": detail}

    async def upload(self, collection, filename, data):
        self._check("upload", collection, filename, len(data))
        self._coll(collection)
        path = Path("/managed") / collection / filename
        if self.upload_dir is not None:
            folder = self.upload_dir / collection
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / filename
            path.write_bytes(data)
        key = self._add_doc(collection, str(path), data.decode("utf-8", "replace"), state="queued")
        return {"collection": collection, "filename": filename, "path": str(path),
                "size_bytes": len(data), "doc_key": key, "state": "queued"}

    async def search(self, query, collections=None, top_k=None, path_glob=None, file_type=None,
                     doc_id=None):
        self._check("search", query)
        hits = self._hits(query, collections, top_k, path_glob, file_type, doc_id)
        meta = {"tier": "and" if hits else None, "words_kept": re.findall(r"\w+", query.lower()),
                "words_dropped": [], "timings_ms": {"total": 0.1}}
        hid = self._new_history("search", query, results=hits, retrieval_meta=meta)
        return {"results": hits, "retrieval_meta": meta, "history_id": hid}

    async def ask(self, query, collections=None, top_k=None, path_glob=None, file_type=None,
                  doc_id=None) -> AsyncIterator[dict[str, Any]]:
        # Validation happens before the first event, as the real engine does, so that a bad
        # request is an HTTP error and not an error event inside a 200 stream.
        self._check("ask", query)
        hits = self._hits(query, collections, top_k, path_glob, file_type, doc_id)
        return self._answer(query, hits, None)

    async def ask_continue(self, history_id) -> AsyncIterator[dict[str, Any]]:
        self._check("ask_continue", history_id)
        h = self.history.get(history_id)
        if h is None or h["kind"] != "ask":
            raise NotFoundError(f"no answer with history id {history_id!r}",
                                hint="list answers with GET /v1/history")
        return self._answer(h["query"], h["sources"], history_id)

    async def _answer(self, query, hits, parent) -> AsyncIterator[dict[str, Any]]:
        self.answers_in_flight += 1
        self.max_answers_in_flight = max(self.max_answers_in_flight, self.answers_in_flight)
        try:
            yield {"type": "sources", "sources": hits}
            for n, h in enumerate(hits, 1):
                yield {"type": "annotation", "n": n, "annotation": f'"{h["text"][:60]}"', "relevant": True}
            if hits:
                text = " ".join(f"{h['text'].split('.')[0]} [{n}]." for n, h in enumerate(hits, 1))
            else:
                text = "The sources do not answer this question."
            answer = []
            for word in re.findall(r"\S+\s*", text):
                if self.token_delay:
                    await asyncio.sleep(self.token_delay)
                answer.append(word)
                yield {"type": "token", "text": word}
            hid = self._new_history("ask", query, sources=hits, answer="".join(answer), parent=parent)
            yield {"type": "done", "history_id": hid, "finish_reason": "stop"}
        finally:
            self.answers_in_flight -= 1

    async def history_list(self, offset=0, limit=50):
        self._check("history_list", offset, limit)
        items = [{k: h[k] for k in ("id", "kind", "query", "created_at")}
                 for h in reversed(list(self.history.values()))]
        return {"items": items[offset: offset + limit], "total": len(items)}

    async def history_show(self, history_id):
        self._check("history_show", history_id)
        if history_id not in self.history:
            raise NotFoundError(f"history entry {history_id!r} does not exist",
                                hint="list entries with GET /v1/history")
        return self.history[history_id]
