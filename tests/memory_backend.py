"""A third storage backend, held in memory, that proves the seam: it implements ``StoreBackend`` and
the stores it opens from ragweedd/store/protocols.py and nothing else, and the storage contract
suite (tests/integration/test_store_backends.py) runs on it as on SQLite and PostgreSQL.

It follows docs/architecture.md, "Adding a storage backend". It is one machine's (``shared`` is
None), keeps nothing across a restart, and ranks keyword matches with FTS5's BM25 over the same
index form the other backends store (ragweedd/keyterms.py).
"""

from __future__ import annotations

import fnmatch
import itertools
import math
import threading
import time
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ragweedd import keyterms
from ragweedd.store.types import PRIMARY, AllOf, ChunkRecord, Job, KeywordQuery, SkippedFile, Terms, leaves

K1, B = 1.2, 0.75  # FTS5's bm25() constants


class _Collection:
    """One collection's rows: what rag.sqlite3 or a collection's rows on the server hold."""

    def __init__(self) -> None:
        self.chunk_ids = itertools.count(1)
        self.chunks: dict[int, dict[str, Any]] = {}  # id -> md5, chunk_idx, text, context, meta, terms
        self.documents: dict[str, dict[str, Any]] = {}  # md5 -> kind, title, ...
        self.paths: dict[str, tuple[str, str]] = {}  # source_file -> (rel_path, md5)
        self.vectors: dict[tuple[str, int], bytes] = {}
        self.embedders: dict[str, tuple[str, int]] = {}
        self.pending: set[int] = set()
        self.changes: list[tuple[int, str, int]] = []
        self.seq = 0
        self.path_writes = 0
        self.languages: dict[str, int] = {}

    def log(self, op: str, cid: int) -> None:
        self.seq += 1
        self.changes.append((self.seq, op, cid))


class MemoryRag:
    """RagStore and KeywordReader of one collection."""

    def __init__(self, backend: MemoryBackend, collection: str) -> None:
        self.collection = collection
        self._lock = backend.lock
        self._c = backend.collections.setdefault(collection, _Collection())
        self.on_rot: Any = None

    def close(self) -> None:
        pass

    # --- writing -----------------------------------------------------------------------------------
    def publish(self, *, md5: str, source_file: str, rel_path: str, kind: str, extractor: str,
                ocr_type: str | None, title: str | None, size_bytes: int, chunks: Iterable[ChunkRecord],
                vectors: Mapping[str, Iterable[bytes | None]], embedders: dict[str, tuple[str, int]],
                replaces_path: bool = True, should_stop: Callable[[], bool] | None = None) -> list[int]:
        # drawn in step, as a generator of a large file's gives them, before anything is written:
        # a failure on the way leaves nothing behind
        its = {space: iter(vs) for space, vs in vectors.items()}
        drawn = [(ch, {space: next(it, None) for space, it in its.items()}) for ch in chunks]
        with self._lock:
            c = self._c
            old = c.paths.get(source_file, (None, None))[1]
            if old is not None and old != md5:
                self._let_go(source_file)
            for space, e in embedders.items():
                c.embedders.setdefault(space, e)
            c.paths[source_file] = (rel_path, md5)
            c.path_writes += 1
            if md5 in c.documents:
                return []  # content already here: only the path is added
            c.documents[md5] = {"kind": kind, "extractor": extractor, "ocr_type": ocr_type, "title": title,
                                "size_bytes": size_bytes}
            lang = keyterms.detect_document([ch["text"] for ch, _ in drawn]) if drawn else "en"
            ids = []
            for ch, vecs in drawn:
                cid = next(c.chunk_ids)
                ids.append(cid)
                c.chunks[cid] = {"md5": md5, "chunk_idx": ch["chunk_idx"], "text": ch["text"],
                                 "context": ch.get("context", ""), "meta": dict(ch.get("meta") or {}),
                                 "terms": keyterms.index_form(ch["text"], lang).split()
                                 + keyterms.index_form(ch.get("context", ""), lang).split()}
                c.languages[lang] = c.languages.get(lang, 0) + 1
                for space, v in vecs.items():
                    if v is not None:
                        c.vectors[(space, cid)] = v
                if vecs.get(PRIMARY) is None:
                    c.pending.add(cid)
                else:
                    c.log("add", cid)
            return ids

    def _let_go(self, source_file: str) -> list[int]:
        """Remove a path; its content leaves with its last path. Returns the chunks removed."""
        c = self._c
        _, md5 = c.paths.pop(source_file)
        c.path_writes += 1
        if any(m == md5 for _, m in c.paths.values()):
            return []
        gone = sorted(cid for cid, ch in c.chunks.items() if ch["md5"] == md5)
        for cid in gone:
            del c.chunks[cid]
            if cid in c.pending:
                c.pending.discard(cid)
            else:
                c.log("delete", cid)
            for key in [k for k in c.vectors if k[1] == cid]:
                del c.vectors[key]
        del c.documents[md5]
        return gone

    def remove_path(self, source_file: str) -> tuple[str | None, list[int]]:
        with self._lock:
            if source_file not in self._c.paths:
                return None, []
            md5 = self._c.paths[source_file][1]
            return md5, self._let_go(source_file)

    def link_path(self, md5: str, source_file: str, rel_path: str) -> list[int]:
        with self._lock:
            if md5 not in self._c.documents:
                return []
            old = self._c.paths.get(source_file, (None, None))[1]
            if old is not None and old != md5:
                self._let_go(source_file)
            self._c.paths[source_file] = (rel_path, md5)
            self._c.path_writes += 1
            return []

    def pending_batch(self, limit: int, after_id: int = 0) -> list[tuple[int, str, str, str]]:
        with self._lock:
            c = self._c
            return [(cid, f"{c.chunks[cid]['md5']}:{c.chunks[cid]['chunk_idx']}", c.chunks[cid]["text"],
                     c.chunks[cid]["context"]) for cid in sorted(c.pending) if cid > after_id][:limit]

    def add_vectors(self, embedder_id: str, items: Sequence[tuple[int, str, str, bytes]]) -> list[int]:
        done = []
        with self._lock:
            c = self._c
            for cid, embedding_id, context, vec in items:
                ch = c.chunks.get(cid)
                if (cid not in c.pending or ch is None or f"{ch['md5']}:{ch['chunk_idx']}" != embedding_id
                        or ch["context"] != context):
                    continue  # not the chunk that was read, or written already
                c.pending.discard(cid)
                c.vectors[(PRIMARY, cid)] = vec
                c.log("add", cid)
                done.append(cid)
        return done

    def pending_summary(self) -> tuple[int, int]:
        with self._lock:
            return len(self._c.pending), len({self._c.chunks[cid]["md5"] for cid in self._c.pending})

    # --- reading -----------------------------------------------------------------------------------
    def chunk_count(self) -> int:
        return len(self._c.chunks)

    def document_count(self) -> int:
        return len(self._c.documents)

    def changes_after(self, seq: int) -> list[tuple[int, str, int]]:
        return [ch for ch in self._c.changes if ch[0] > seq]

    def changes_batch_after(self, seq: int, limit: int) -> list[tuple[int, str, int]]:
        return self.changes_after(seq)[:limit]

    def change_counts_after(self, seq: int) -> tuple[int, int]:
        ops = [op for _, op, _ in self.changes_after(seq)]
        return ops.count("add"), ops.count("delete")

    def max_seq(self) -> int:
        return self._c.changes[-1][0] if self._c.changes else 0

    def min_seq(self) -> int | None:
        return self._c.changes[0][0] if self._c.changes else None

    def search_version(self) -> tuple[int, int, int, int]:
        return self.max_seq(), max(self._c.chunks, default=0), 0, self._c.path_writes

    def version(self) -> tuple[int, int]:
        return self.max_seq(), max(self._c.chunks, default=0)

    def chunk_ids_of(self, md5: str) -> list[int]:
        return sorted(cid for cid, ch in self._c.chunks.items() if ch["md5"] == md5)

    def chunk_ids_of_documents(self, md5s: Sequence[str]) -> set[int]:
        want = set(md5s)
        return {cid for cid, ch in self._c.chunks.items() if ch["md5"] in want}

    def chunks_of(self, md5: str) -> int:
        return len(self.chunk_ids_of(md5))

    def md5_of_path(self, source_file: str) -> str | None:
        return self._c.paths.get(source_file, (None, None))[1]

    def has_document(self, md5: str) -> bool:
        return md5 in self._c.documents

    def paths_of(self, md5: str) -> list[str]:
        return sorted(p for p, (_, m) in self._c.paths.items() if m == md5)

    def document_paths(self) -> list[tuple[str, str, str]]:
        return [(p, rel, md5) for p, (rel, md5) in sorted(self._c.paths.items())]

    def every_document_path(self) -> list[tuple[str, str, str]]:
        return self.document_paths()

    def _path_of(self, md5: str) -> str:
        paths = self.paths_of(md5)
        return paths[0] if paths else ""

    def hits(self, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        out = {}
        for cid in ids:
            ch = self._c.chunks.get(cid)
            if ch is None:
                continue
            m = ch["meta"]
            lines = [m["line_start"], m["line_end"]] if m.get("line_start") is not None else None
            out[cid] = {"id": cid, "doc_id": ch["md5"], "chunk_idx": ch["chunk_idx"], "text": ch["text"],
                        "source_file": self._path_of(ch["md5"]), "lines": lines, "pages": m.get("pages"),
                        "page_label": m.get("page_label"), "span": [m.get("char_start"), m.get("char_end")],
                        "section": ch["context"] or None}
        return out

    def briefs(self, ids: Sequence[int]) -> dict[int, tuple[str, str, str, list[int] | None]]:
        return {cid: (ch["md5"], self._path_of(ch["md5"]), ch["text"], ch["meta"].get("pages"))
                for cid in ids if (ch := self._c.chunks.get(cid)) is not None}

    def headings(self, ids: Sequence[int]) -> dict[int, str]:
        return {cid: ch["context"] for cid in ids if (ch := self._c.chunks.get(cid)) is not None and ch["context"]}

    def embedder(self, space: str = PRIMARY) -> tuple[str, int] | None:
        return self._c.embedders.get(space)

    def vectors_for(self, ids: Sequence[int], space: str = PRIMARY) -> dict[int, bytes]:
        return {cid: v for cid in ids if (v := self._c.vectors.get((space, cid))) is not None}

    def iter_vectors(self, space: str = PRIMARY, batch: int = 10000) -> Iterator[tuple[list[int], list[bytes]]]:
        items = sorted((cid, v) for (s, cid), v in self._c.vectors.items() if s == space)
        for i in range(0, len(items), batch):
            part = items[i:i + batch]
            yield [cid for cid, _ in part], [v for _, v in part]

    def set_embedder(self, embedder_id: str, dim: int, space: str = PRIMARY) -> None:
        with self._lock:
            self._c.embedders[space] = (embedder_id, dim)

    def pass_changes_after(self, space: str, seq: int, limit: int = 10000) -> list[tuple[int, str, int]]:
        return []  # no extra embedding pass writes here

    def pass_max_seq(self, space: str) -> int:
        return 0

    def entropy_rows(self) -> list[tuple[int, float | None, int | None]]:
        return [(cid, ch["meta"].get("text_entropy"), ch["meta"].get("word_count"))
                for cid, ch in sorted(self._c.chunks.items())]

    def rebuild_fts(self, batch: int = 1000) -> int:
        return len(self._c.chunks)  # the terms are made with each chunk: nothing to rebuild

    def tree_documents(self) -> list[dict[str, Any]]:
        return [{"md5": md5, "title": d["title"], "chunks": self.chunks_of(md5), "source_file": self._path_of(md5)}
                for md5, d in sorted(self._c.documents.items()) if self._path_of(md5)]

    def tree_sections(self, md5: str) -> list[dict[str, Any]]:
        rows = sorted((ch["chunk_idx"], cid, ch) for cid, ch in self._c.chunks.items() if ch["md5"] == md5)
        return [{"id": cid, "section_path": list(ch["meta"].get("section_path") or
                                                 ([ch["meta"]["section"]] if ch["meta"].get("section") else [])),
                 "pages": list(ch["meta"].get("pages") or []), "text": ch["text"]} for _, cid, ch in rows]

    # --- the questions a shared store answers differently ---------------------------------------------
    def check_embedder(self, embedder_id: str) -> None:
        return None

    def release_claims(self) -> int:
        return 0

    def nearest(self, q: Any, k: int, *, space: str = PRIMARY, allowed: Iterable[int] | None = None,
                ef: int | None = None) -> list[tuple[int, float]] | None:
        return None  # ranked by the index (or exactly over vectors_for), as SQLite's are

    # --- keywords: FTS5's BM25 over the index form ----------------------------------------------------
    def _rows(self, q: KeywordQuery) -> set[int]:
        if isinstance(q, Terms):
            return {cid for cid, ch in self._c.chunks.items() if _holds(ch["terms"], q.terms)}
        sets = [self._rows(p) for p in q.parts]
        return set.intersection(*sets) if isinstance(q, AllOf) else set.union(*sets)

    def keyword_match(self, query: KeywordQuery, limit: int) -> list[tuple[int, float]]:
        with self._lock:
            rows = self._rows(query)
            n = max(len(self._c.chunks), 1)
            avgdl = max(sum(len(ch["terms"]) for ch in self._c.chunks.values()) / n, 1.0)
            scored = []
            phrases = leaves(query)  # a phrase given twice weighs twice, as in FTS5's bm25()
            dfs = {p: len(self._rows(p)) for p in phrases}  # each phrase's rows counted once per query
            for cid in rows:
                terms = self._c.chunks[cid]["terms"]
                s = 0.0
                for p in phrases:
                    df = dfs[p]
                    tf = _count(terms, p.terms)
                    if tf:
                        idf = max(math.log((n - df + 0.5) / (df + 0.5)), 1e-6)
                        s += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(terms) / avgdl))
                scored.append((cid, s))
            scored.sort(key=lambda h: (-h[1], h[0]))
            return scored[:limit]

    def match(self, query: KeywordQuery, limit: int) -> list[tuple[int, float]]:
        return self.keyword_match(query, limit)

    def df_term(self, term: str) -> int:
        return len(self._rows(Terms((term,))))

    def df_match(self, term: str) -> int:
        return len(self._rows(Terms(tuple(term.split()))))

    def df_word(self, word: str) -> int:
        terms = word.split()
        return min((self.df_term(t) for t in terms), default=0)

    def languages(self) -> dict[str, int]:
        return dict(self._c.languages)

    def mean_row_tokens(self) -> float:
        return sum(len(ch["terms"]) for ch in self._c.chunks.values()) / max(len(self._c.chunks), 1)

    def row_stats(self, ids: list[int], terms: list[str]) -> tuple[dict[int, int], dict[int, dict[str, int]]]:
        chunks = {cid: self._c.chunks[cid]["terms"] for cid in ids if cid in self._c.chunks}
        return ({cid: len(t) for cid, t in chunks.items()},
                {cid: {w: t.count(w) for w in terms if w in t} for cid, t in chunks.items()})


def _count(terms: list[str], phrase: tuple[str, ...]) -> int:
    n = len(phrase)
    return sum(1 for i in range(len(terms) - n + 1) if tuple(terms[i:i + n]) == phrase)


def _holds(terms: list[str], phrase: tuple[str, ...]) -> bool:
    return _count(terms, phrase) > 0


class MemoryJobs:
    """JobStore: coalescing per path, upserts before deletes, backoff, failures kept."""

    def __init__(self, backend: MemoryBackend, max_tries: int) -> None:
        self._b, self.max_tries = backend, max_tries
        self.abandoned = 0
        self.serves: Callable[[], Collection[str]] | None = None  # one process: every job is its own
        self._given_up: dict[int, Job] = {}

    def close(self) -> None:
        pass

    def close_waiters(self) -> None:
        pass

    def put(self, collection: str, path: str, op: str, root: str | None = None, *, delay_s: float = 0.0) -> None:
        self.put_many([(collection, path, op, root)], delay_s=delay_s)

    def put_many(self, items: list[tuple[str, str, str, str | None]], *, delay_s: float = 0.0) -> int:
        with self._b.lock:
            for collection, path, op, root in items:
                row = self._b.jobs.get((collection, path))
                if row is None or row["state"] == "failed":
                    self._b.jobs[(collection, path)] = {
                        "id": next(self._b.job_ids), "collection": collection, "path": path, "root": root, "op": op,
                        "state": "queued", "tries": 0, "error": None, "not_before": time.time() + delay_s,
                        "again": None}
                elif row["state"] == "running":
                    row["again"] = op  # changed while it ran: it runs again after done
                else:
                    row.update(op=op, root=root if root is not None else row["root"])
            return len(items)

    def claim(self, timeout_s: float | None = None, skip: Collection[int] = ()) -> Job | None:
        with self._b.lock:
            if self._given_up:
                _, job = self._given_up.popitem()
                self.abandoned = len(self._given_up)
                return job
            now = time.time()
            ready = [r for r in self._b.jobs.values()
                     if r["state"] == "queued" and r["not_before"] <= now and r["id"] not in skip]
            if not ready:
                return None
            r = min(ready, key=lambda r: (r["op"] == "delete", r["id"]))
            r["state"] = "running"
            return Job(r["id"], r["collection"], r["path"], r["root"], r["op"], r["tries"])

    def _row(self, job: Job) -> dict[str, Any] | None:
        r = self._b.jobs.get((job.collection, job.path))
        return r if r is not None and r["id"] == job.id else None

    def done(self, job: Job) -> None:
        with self._b.lock:
            r = self._row(job)
            if r is None:
                return
            if r["again"] is not None:
                r.update(state="queued", op=r["again"], again=None, tries=0, not_before=time.time())
            else:
                del self._b.jobs[(job.collection, job.path)]

    def fail(self, job: Job, error: str, *, retryable: bool = True) -> bool:
        with self._b.lock:
            r = self._row(job)
            if r is None:
                return False
            r["tries"] += 1
            r["error"] = error
            if retryable and r["tries"] < self.max_tries:
                r.update(state="queued", not_before=time.time() + 2.0 ** r["tries"])
                return True
            r["state"] = "failed"
            return False

    def release(self, job: Job) -> None:
        with self._b.lock:
            r = self._row(job)
            if r is not None:
                r.update(state="queued", not_before=time.time())

    def abandon(self, job: Job) -> None:
        """A job whose outcome could not be written: the next claim gives it back, no try spent."""
        with self._b.lock:
            self._given_up[job.id] = job
            self.abandoned = len(self._given_up)

    def depth(self, collection: str | None = None) -> dict[str, int]:
        return self._b.job_depth(collection)

    def failed(self, limit: int = 50) -> list[dict]:
        return self._b.failed_jobs(limit)

    def pending_paths(self, collection: str) -> set[str]:
        with self._b.lock:
            return {p for (c, p), r in self._b.jobs.items() if c == collection and r["state"] != "failed"}

    def drop_collection(self, collection: str) -> None:
        with self._b.lock:
            for key in [k for k in self._b.jobs if k[0] == collection]:
                del self._b.jobs[key]


class MemoryIngest:
    """IngestStore: the files' live rows, the collections added at run time, the embed cache."""

    def __init__(self, backend: MemoryBackend) -> None:
        self._b = backend

    def close(self) -> None:
        pass

    def _live(self, collection: str, path: str) -> dict[str, Any] | None:
        return next((r for r in self._b.files if r["collection"] == collection and r["source_file"] == path
                     and not r["superseded"]), None)

    def live_file(self, collection: str, source_file: str) -> dict[str, Any] | None:
        with self._b.lock:
            r = self._live(collection, source_file)
            return dict(r) if r is not None else None

    def file_by_id(self, file_id: int) -> dict[str, Any] | None:
        return next((dict(r) for r in self._b.files if r["id"] == file_id), None)

    def set_file(self, collection: str, source_file: str, *, md5: str | None, size: int | None,
                 mtime_ns: int | None, inode: int | None, status: str, chunks: int = 0,
                 error: str | None = None, root: str | None = None, tries: int | None = None) -> None:
        with self._b.lock:
            row = self._live(collection, source_file)
            if row is not None and row["md5"] is not None and md5 is not None and row["md5"] != md5:
                row["superseded"] = 1
                row = None
            fields = {"size_bytes": size, "mtime_ns": mtime_ns, "inode": inode, "extract_status": status,
                      "chunks": chunks, "error": error}
            if row is None:
                self._b.files.append({"id": next(self._b.file_ids), "collection": collection,
                                      "source_file": source_file, "md5": md5, "root": root, "tries": tries or 0,
                                      "superseded": 0, **fields})
            else:
                row.update(fields, md5=md5 or row["md5"], root=root or row["root"],
                           tries=row["tries"] if tries is None else tries)

    def live_files(self, collection: str) -> list[dict[str, Any]]:
        return [dict(r) for r in self._b.files if r["collection"] == collection and not r["superseded"]]

    def held_file(self, collection: str, source_file: str) -> bool:
        return any(r["collection"] == collection and r["source_file"] == source_file for r in self._b.files)

    def record_collection_chunks(self, collection: str, md5: str, chunks: int) -> None:
        self._b.collection_chunks[(collection, md5)] = chunks

    def forget_collection_chunks(self, collection: str, md5: str) -> None:
        self._b.collection_chunks.pop((collection, md5), None)

    def mark_deleted(self, collection: str, source_file: str) -> str | None:
        with self._b.lock:
            row = self._live(collection, source_file)
            if row is None:
                return None
            row.update(superseded=1, extract_status="deleted")
            return row["md5"]

    def _has_job(self, collection: str, path: str) -> bool:
        r = self._b.jobs.get((collection, path))
        return r is not None and r["state"] in ("queued", "running")

    def record_skipped(self, collection: str, files: Sequence[SkippedFile]) -> list[str]:
        held = []
        with self._b.lock:
            for f in files:
                row = self._live(collection, f.path)
                if self._has_job(collection, f.path) or (row is not None and row["extract_status"] != "skipped"):
                    held.append(f.path)
                    continue
                self.set_file(collection, f.path, md5=f.md5, size=f.size, mtime_ns=f.mtime_ns, inode=f.inode,
                              status="skipped", error=f.reason, root=f.root)
        return held

    def forget_skipped(self, collection: str, source_files: Sequence[str]) -> list[str]:
        held = []
        with self._b.lock:
            for p in source_files:
                row = self._live(collection, p)
                if self._has_job(collection, p) or row is None or row["extract_status"] != "skipped":
                    held.append(p)
                    continue
                row.update(superseded=1, extract_status="deleted")
        return held

    def counts_by_state(self, collection: str | None = None) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self._b.files:
            if not r["superseded"] and (not collection or r["collection"] == collection):
                out[r["extract_status"]] = out.get(r["extract_status"], 0) + 1
        return out

    def done_count(self, collection: str) -> int:
        return self.counts_by_state(collection).get("done", 0)

    def is_live(self, collection: str, source_file: str) -> bool:
        return self._live(collection, source_file) is not None

    def live_paths_under(self, collection: str, prefix: str) -> list[str]:
        base = prefix.rstrip("/") + "/"
        return [r["source_file"] for r in self._b.files if r["collection"] == collection and not r["superseded"]
                and r["source_file"].startswith(base)]

    def live_stats(self, collection: str) -> dict[str, dict[str, Any]]:
        return {r["source_file"]: dict(r) for r in self._b.files if r["collection"] == collection
                and not r["superseded"]}

    def live_paths_for_md5(self, collection: str, md5: str) -> list[str]:
        return [r["source_file"] for r in self._b.files if r["collection"] == collection and r["md5"] == md5
                and not r["superseded"] and r["extract_status"] == "done"]

    def live_files_page(self, *, collection: str | None, states: list[str] | None, path_glob: str | None,
                        offset: int, limit: int) -> tuple[list[dict[str, Any]], int]:
        rows = sorted((r for r in self._b.files if not r["superseded"]
                       and (not collection or r["collection"] == collection)
                       and (states is None or r["extract_status"] in states)
                       and (not path_glob or fnmatch.fnmatchcase(r["source_file"], path_glob)
                            or fnmatch.fnmatchcase(r["source_file"], "*/" + path_glob))),
                      key=lambda r: (r["collection"], r["source_file"]))
        return [dict(r) for r in rows[offset:offset + limit]], len(rows)

    def save_collection(self, name: str, paths: Sequence[str], ignore: Sequence[str], topic: str) -> None:
        self._b.run_time[name] = (name, list(paths), list(ignore), topic)

    def run_time_collections(self) -> list[tuple[str, list[str], list[str], str]]:
        return [self._b.run_time[n] for n in sorted(self._b.run_time)]

    def forget_collection_files(self, collection: str, *, also_collection: bool = False) -> None:
        with self._b.lock:
            self._b.files[:] = [r for r in self._b.files if r["collection"] != collection]
            if also_collection:
                self._b.run_time.pop(collection, None)

    def store_vectors(self, embedder_id: str, dim: int, items: list[tuple[str, bytes]]) -> None:
        self._b.embed_cache.update({(embedder_id, h): v for h, v in items})

    def cached_vectors(self, embedder_id: str, text_hashes: list[str]) -> dict[str, bytes]:
        return {h: v for h in text_hashes if (v := self._b.embed_cache.get((embedder_id, h))) is not None}

    def job_depth(self, collection: str | None = None) -> dict[str, int]:
        return self._b.job_depth(collection)

    def forget_removed_collection(self, collection: str) -> None:
        with self._b.lock:
            for key in [k for k in self._b.jobs if k[0] == collection]:
                del self._b.jobs[key]
            self.forget_collection_files(collection, also_collection=True)

    def failed_jobs(self, limit: int) -> list[dict]:
        return self._b.failed_jobs(limit)


class MemoryHistory:
    """HistoryRows: searches and answers, newest first."""

    def __init__(self, backend: MemoryBackend) -> None:
        self._rows = backend.history
        self._titles = backend.conversation_titles

    def close(self) -> None:
        pass

    def insert(self, hid: str, kind: str, query: str, created_at: float, body_json: str, *, keep: int = 0) -> None:
        self._rows[hid] = {"id": hid, "kind": kind, "query": query, "created_at": created_at, "body_json": body_json,
                           "conversation": None, "turn": None}
        if keep > 0:
            for old in self._newest()[keep:]:
                del self._rows[old["id"]]

    def _newest(self) -> list[dict[str, Any]]:
        order = {hid: i for i, hid in enumerate(self._rows)}
        return sorted(self._rows.values(), key=lambda r: (-r["created_at"], -order[r["id"]]))

    def count(self) -> int:
        return len(self._rows)

    def get(self, hid: str) -> dict[str, Any] | None:
        r = self._rows.get(hid)
        return dict(r) if r is not None else None

    def page(self, offset: int, limit: int, kind: str | None = None) -> tuple[int, list[tuple[Any, ...]]]:
        rows = [r for r in self._newest() if kind is None or r["kind"] == kind]
        return len(rows), [(r["id"], r["kind"], r["query"], r["created_at"], r["conversation"], r["turn"])
                           for r in rows[offset:offset + limit]]

    def set_body(self, hid: str, body_json: str) -> bool:
        if hid not in self._rows:
            return False
        self._rows[hid]["body_json"] = body_json
        return True

    def delete(self, hid: str) -> bool:
        return self._rows.pop(hid, None) is not None

    def insert_turn(self, hid: str, query: str, created_at: float, body_json: Callable[[int], str], *,
                    conversation: str, title: str | None, keep: int = 0) -> int:
        turn = 1 + max((r["turn"] for r in self._rows.values() if r["conversation"] == conversation), default=0)
        self.insert(hid, "ask", query, created_at, body_json(turn), keep=keep)
        self._rows[hid].update(conversation=conversation, turn=turn)
        self._titles.setdefault(conversation, title or query)
        return turn

    def _turns(self, cid: str) -> list[dict[str, Any]]:
        return sorted((r for r in self._rows.values() if r["conversation"] == cid), key=lambda r: r["turn"])

    def conversation(self, cid: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        turns = self._turns(cid)
        if not turns:
            return None
        head = {"id": cid, "title": self._titles.get(cid, turns[0]["query"]), "created_at": turns[0]["created_at"],
                "updated_at": turns[-1]["created_at"], "turns": len(turns)}
        return head, [dict(r) for r in turns]

    def conversation_page(self, offset: int, limit: int) -> tuple[int, list[tuple[str, str, float, float, int]]]:
        heads = [h for cid in {r["conversation"] for r in self._rows.values() if r["conversation"]}
                 if (got := self.conversation(cid)) is not None for h in [got[0]]]
        heads.sort(key=lambda h: -h["updated_at"])
        return len(heads), [(h["id"], h["title"], h["created_at"], h["updated_at"], h["turns"])
                            for h in heads[offset:offset + limit]]

    def delete_conversation(self, cid: str) -> int | None:
        turns = self._turns(cid)
        if not turns:
            return None
        for r in turns:
            del self._rows[r["id"]]
        self._titles.pop(cid, None)
        return len(turns)

    def adopt_conversations(self) -> int:
        return 0  # no entry was written before conversations existed


class MemoryIdfCache:
    """IdfCacheStore: document frequencies per collection, valid for the (rows, sequence) built at."""

    def __init__(self, backend: MemoryBackend) -> None:
        self._b = backend

    def close(self) -> None:
        pass

    def built_at(self, collection: str) -> tuple[int | None, int | None]:
        return self._b.idf.get(collection, ((None, None), {}))[0]

    def restart(self, collection: str, n: int, seq: int) -> None:
        self._b.idf[collection] = ((n, seq), {})

    def remember(self, collection: str, dfs: Iterable[tuple[str, int]]) -> None:
        self._b.idf.setdefault(collection, ((None, None), {}))[1].update(dfs)

    def lookup(self, collection: str, terms: list[str]) -> dict[str, int]:
        known = self._b.idf.get(collection, ((None, None), {}))[1]
        return {t: known[t] for t in terms if t in known}


class MemoryBackend:
    """StoreBackend of one process's memory."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.collections: dict[str, _Collection] = {}
        self.jobs: dict[tuple[str, str], dict[str, Any]] = {}
        self.job_ids = itertools.count(1)
        self.files: list[dict[str, Any]] = []
        self.file_ids = itertools.count(1)
        self.run_time: dict[str, tuple[str, list[str], list[str], str]] = {}
        self.embed_cache: dict[tuple[str, str], bytes] = {}
        self.collection_chunks: dict[tuple[str, str], int] = {}
        self.history: dict[str, dict[str, Any]] = {}
        self.conversation_titles: dict[str, str] = {}
        self.idf: dict[str, tuple[tuple[int | None, int | None], dict[str, int]]] = {}
        self.on_rot: Callable[[Any, dict[int, str]], None] | None = None

    @property
    def where(self) -> str:
        return "this process's memory"

    @property
    def shared(self) -> None:
        return None

    def close(self) -> None:
        pass

    def open_rag(self, collection: str, *, readonly: bool = False) -> MemoryRag:
        return MemoryRag(self, collection)

    def has_rag(self, collection: str) -> bool:
        return collection in self.collections

    def indexed_collections(self) -> list[str]:
        return sorted(self.collections)

    def rag_identity(self, collection: str) -> Hashable:
        c = self.collections.get(collection)
        return None if c is None else id(c)

    def repair_at_start(self, collections: Sequence[str]) -> dict[str, Any]:
        return {}

    def integrity_check(self, collections: list[str], index_count: Callable[[str], int | None]) -> dict[str, Any]:
        return {"ok": True, "repair": False, "ingest_db": [], "history": [], "collections": {}, "mended": []}

    def open_ingest(self, *, readonly: bool = False) -> MemoryIngest:
        return MemoryIngest(self)

    def open_jobs(self, *, max_tries: int) -> MemoryJobs:
        with self.lock:
            for r in self.jobs.values():  # one process: a queue opened again is a restart
                if r["state"] == "running":
                    r["state"] = "queued"
        return MemoryJobs(self, max_tries)

    def open_keyword_reader(self, collection: str) -> MemoryRag:
        return MemoryRag(self, collection)

    def open_idf_cache(self, *, timeout_s: float) -> MemoryIdfCache:
        return MemoryIdfCache(self)

    def open_history(self) -> MemoryHistory:
        return MemoryHistory(self)

    def job_depth(self, collection: str | None = None) -> dict[str, int]:
        out: dict[str, int] = {}
        with self.lock:
            for (c, _), r in self.jobs.items():
                if collection is None or c == collection:
                    out[r["state"]] = out.get(r["state"], 0) + 1
        return out

    def failed_jobs(self, limit: int) -> list[dict]:
        with self.lock:
            return [{"collection": r["collection"], "path": r["path"], "op": r["op"], "tries": r["tries"],
                     "error": r["error"]} for r in self.jobs.values() if r["state"] == "failed"][:limit]


if TYPE_CHECKING:
    from ragweedd.store.protocols import (
        HistoryRows,
        IdfCacheStore,
        IngestStore,
        JobStore,
        KeywordReader,
        RagStore,
        StoreBackend,
    )

    def _conforms(b: MemoryBackend) -> None:
        # mypy checks here that the in-memory stores keep the seam's shapes
        _r: RagStore = b.open_rag("c")
        _k: KeywordReader = b.open_keyword_reader("c")
        _j: JobStore = b.open_jobs(max_tries=1)
        _h: HistoryRows = b.open_history()
        _i: IdfCacheStore = b.open_idf_cache(timeout_s=1)
        _g: IngestStore = b.open_ingest()
        _b: StoreBackend = b
