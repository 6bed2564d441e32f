"""The periodic integrity check: ``PRAGMA quick_check`` of every database, FTS5's own
'integrity-check', count agreement between chunks, FTS rows, stored vectors and the vector index,
each stored chunk text against the hash stored with it, and ingest_db's path -> md5 rows against
each rag.sqlite3's documents.

It only reads: it runs beside live connections, so it never moves a database itself. Every
problem names its file; damage (a failing check, a changed or missing chunk text, a keyword index or
vector rows out of step, ingest and rag out of step) sets ``repair`` in the result, and the daemon
then repairs it live by the start-up repair (ragweedd/store/sqlite/repair.py): it stops its ingest side,
moves the damaged file aside, and re-ingests from disk. Nothing a damaged file raises ends the job:
the finding is reported instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ragweedd.logging import get_logger
from ragweedd.paths import Paths
from ragweedd.store.sqlite.checks import collection_counts, quick_check
from ragweedd.store.sqlite.ingest_db import IngestDB
from ragweedd.store.sqlite.rag_db import RagDB

log = get_logger("ragweedd.integrity")

RESTART = ("ragweedd moves the damaged database aside and rebuilds it from your files now (a restart "
           "does the same)")
RESTART_FTS = "ragweedd rebuilds the keyword index from the stored chunk text now (a restart does the same)"
REINGEST = ("ragweedd re-ingests from disk the files whose stored content is missing or changed now "
            "(a restart does the same)")


HISTORY = ("ragweedd moves the damaged history aside now and keeps the entries that can still be read "
           "(a restart does the same)")


def check_db(path: Path, hint: str = RESTART) -> list[str]:
    return [f"{path}: damaged ({r}); {hint}" for r in quick_check(path)]


def check_collection(path: Path, index_count: int | None = None, live: dict[str, str] | None = None) -> dict:
    problems = check_db(path)
    out: dict = {"chunks": None, "fts_rows": None, "vectors": None, "index_count": index_count,
                 "problems": problems, "damaged": bool(problems)}
    if problems:
        return out  # counts of a damaged file mean nothing, and reading it may fail anyway
    try:
        c = collection_counts(path)
        if c.fts_error is not None:
            problems.append(f"{path}: FTS integrity-check failed: {c.fts_error}; {RESTART_FTS}")
        chunks, fts, vectors = c.chunks, c.fts_rows, c.vectors
        out.update(chunks=chunks, fts_rows=fts, vectors=vectors)
        if c.fts_error is not None or fts != chunks:
            out["damaged"] = True
        if fts != chunks:
            problems.append(f"{path}: {fts} keyword rows for {chunks} chunks; {RESTART_FTS}")
        out["pending_vectors"] = c.pending
        if vectors + c.pending != chunks:
            out["damaged"] = True
            problems.append(f"{path}: {vectors} stored vectors and {c.pending} waiting for {chunks} chunks; "
                            f"{REINGEST}")
        if index_count is not None and index_count != vectors:
            problems.append(f"{path}: vector index holds {index_count} vectors for {vectors} stored (it catches up "
                            f"from the change log; if this persists, stop ragweedd, delete the index files in "
                            f"{path.parent} (data_level0*, link_lists*, header*, index_meta*) and start it: they "
                            f"are rebuilt from the database)")
        rag = RagDB(path, path.parent.name, readonly=True)
        try:
            bad = rag.chunk_text_mismatches()
            if bad:
                out["damaged"] = True
                problems.append(f"{path}: the stored text of {len(bad)} documents no longer matches what was "
                                f"indexed (files: {', '.join(sorted(rag.paths_of(sorted(bad)[0])))[:200]} ...); "
                                f"{REINGEST}")
            if live is not None:
                held = {p: md5 for p, _rel, md5 in rag.document_paths()}
                stale = sorted(p for p, md5 in live.items() if held.get(p) != md5)
                if stale:
                    out["damaged"] = True
                    problems.append(f"{path}: {len(stale)} files recorded as indexed are missing or out of date "
                                    f"there (e.g. {stale[0]}); {REINGEST}")
        finally:
            rag.close()
    except Exception as e:  # noqa: BLE001 - a file that breaks the check is itself the finding
        out["damaged"] = True
        problems.append(f"{path}: the check failed: {type(e).__name__}: {e}; {RESTART}")
    return out


def integrity_check(paths: Paths, collections: list[str],
                    index_count: Callable[[str], int | None] = lambda c: None) -> dict:
    """Check every database; ``repair`` in the result says the start-up repair should run now."""
    out: dict = {"ok": True, "repair": False, "ingest_db": check_db(paths.ingest_db), "collections": {}, "mended": [],
                 "history": check_db(paths.history_db, HISTORY) if Path(paths.history_db).exists() else []}
    if out["ingest_db"] or out["history"]:
        out["ok"] = False
    live_by_collection: dict[str, dict[str, str]] = {}
    if not out["ingest_db"] and Path(paths.ingest_db).exists():
        try:
            ingest = IngestDB(paths.ingest_db, readonly=True)
            try:
                for name in collections:
                    live_by_collection[name] = {r["source_file"]: r["md5"] for r in ingest.live_files(name)
                                                if r["extract_status"] == "done" and r["md5"]}
            finally:
                ingest.close()
        except Exception as e:  # noqa: BLE001
            out["ok"] = False
            out["ingest_db"].append(f"{paths.ingest_db}: cannot be read: {e}; {RESTART}")
    for name in collections:
        db = paths.rag_db(name)
        live = live_by_collection.get(name)
        if not Path(db).exists():
            if live:
                out["ok"] = False
                out["collections"][name] = {
                    "chunks": 0, "fts_rows": 0, "vectors": 0, "index_count": index_count(name), "damaged": True,
                    "problems": [f"{db} is missing while {len(live)} files are recorded as indexed; {REINGEST}"]}
            continue
        try:
            count = index_count(name)
        except Exception:  # noqa: BLE001 - the index's own trouble is reported by the index layer
            count = None
        res = check_collection(db, count, live)
        out["collections"][name] = res
        if res["problems"]:
            out["ok"] = False
    out["repair"] = bool(out["ingest_db"] or out["history"]) or any(
        c.get("damaged") for c in out["collections"].values())
    return out
