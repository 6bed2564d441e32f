"""Start-up check and repair of the databases (DESIGN §3 durability rule).

Run by the daemon after it holds the data dir's writer lock and before anything opens a database,
so nothing else has a connection to a file this moves aside. The files on disk are what is true;
both databases are derived from them (rag.sqlite3 fully, ingest_db mostly), so every repair ends
in "ingest these files again", which the start-up scan then does:

1. ``ingest_db.sqlite3`` fails ``PRAGMA quick_check`` (or cannot be opened): it is moved aside as
   ``ingest_db.sqlite3.damaged-<time>``; a new one gets what can still be read (collections added
   at run time, the embed cache), and the start-up scan records every file again (content already
   in a collection is only linked, nothing is re-embedded).
2. A collection's ``rag.sqlite3`` fails the check: it is moved aside likewise, its index files are
   removed, ingest forgets the collection's files, and the scan ingests them again (vectors come
   from the embed cache when it has them).
3. ingest_db's path -> md5 rows are checked against each rag.sqlite3's documents: a path ingest
   calls done whose content rag does not hold (rag.sqlite3 moved aside, edits lost with a -wal) is
   forgotten so the scan ingests it again; a path rag holds that ingest does not know leaves rag.
4. Chunks an interrupted large publish or removal left hidden (store/sqlite/rag_hidden.py) are deleted.
   Each stored chunk text is checked against the hash stored with it (and has its keyword row and
   vector); a document with a changed or incomplete chunk leaves rag and its files are ingested
   again. A keyword index that fails FTS5's own check is rebuilt from the stored texts.

5. ``history.sqlite3`` (not derived from the files: the user's searches and answers) fails the
   check: it is moved aside likewise and a new one gets every entry that can still be read.

An index whose ``applied_seq`` is ahead of the change log is rebuilt by the index layer
(ragweedd/index/sync.py). What was found and done is returned for the log and status.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ragweedd.logging import get_logger
from ragweedd.paths import Paths, valid_collection_name
from ragweedd.store.sqlite.checks import collection_counts, quick_check
from ragweedd.store.sqlite.history_db import HistoryDB
from ragweedd.store.sqlite.ingest_db import IngestDB
from ragweedd.store.sqlite.rag_db import RagDB

log = get_logger("ragweedd.repair")

INDEX_FILE_PREFIXES = ("data_level0", "link_lists", "header", "index_meta")


def move_aside(db: Path) -> Path:
    """Rename a damaged database (and its -wal/-shm) out of the way; returns the new name. Kept,
    not deleted: it may hold something its owner wants back."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = db.with_name(f"{db.name}.damaged-{stamp}")
    for suffix in ("-wal", "-shm", ""):
        src = Path(str(db) + suffix)
        if src.exists():
            os.replace(src, Path(str(target) + suffix))
    return target


def drop_shm(db: Path) -> None:
    """Remove the -shm of a database nobody has open. It only indexes the -wal and SQLite rebuilds
    it from the -wal on the next open; a stale one (its -wal deleted or truncated after a crash)
    makes every open fail with "disk I/O error" instead. Safe here: the daemon holds the data dir's
    writer lock and opens nothing before this check; and only a -shm whose -wal is gone or shorter
    than a WAL header is removed, so a reader another program holds open keeps a sound one."""
    wal = Path(str(db) + "-wal")
    if not wal.exists() or wal.stat().st_size < 32:
        Path(str(db) + "-shm").unlink(missing_ok=True)


def remove_index_files(directory: Path) -> None:
    for p in directory.iterdir():
        if p.is_file() and p.name.startswith(INDEX_FILE_PREFIXES):
            p.unlink(missing_ok=True)


def check_and_repair(paths: Paths, collections: list[str] | None = None) -> dict:
    """Check both databases and repair what is damaged or out of step. Returns
    ``{"ingest_db": [notes], "collections": {name: [notes]}, "rebuilt": [collection names],
    "history": [notes]}``."""
    out: dict = {"ingest_db": [], "collections": {}, "rebuilt": [], "history": []}
    _check_history(paths, out["history"])
    if paths.ingest_db.exists():
        drop_shm(paths.ingest_db)
        problems = quick_check(paths.ingest_db, recover=True)
        if problems:
            aside = move_aside(paths.ingest_db)
            ingest = IngestDB(paths.ingest_db)
            copied: dict[str, int] | dict[str, str]
            try:
                copied = ingest.copy_salvageable_from(aside)
            except Exception as e:  # noqa: BLE001 - nothing salvageable: the scan rebuilds it all
                copied = {"error": str(e)}
            finally:
                ingest.close()
            note = (f"{paths.ingest_db} was damaged ({'; '.join(problems)}); it was moved aside to {aside.name} "
                    f"and rebuilt from your files (kept from it: {copied})")
            out["ingest_db"].append(note)
            log.error("database_repaired", database=str(paths.ingest_db), problems=problems, moved_to=str(aside),
                      salvaged=copied)
    ingest = IngestDB(paths.ingest_db)
    try:
        names = set(collections or []) | set(ingest.collections_with_files())
        if paths.collections.is_dir():
            # a stray folder whose name no collection may have ("lost+found") is not a collection
            names |= {p.name for p in paths.collections.iterdir() if p.is_dir() and valid_collection_name(p.name)}
        for name in sorted(names):
            try:
                notes = _check_collection(paths, ingest, name)
            except Exception as e:  # noqa: BLE001 - whatever the repair meets must not stop the daemon
                notes = _rebuild_collection(paths, ingest, name, f"its repair failed: {type(e).__name__}: {e}")
            if notes:
                out["collections"][name] = notes
                out["rebuilt"].append(name)
    finally:
        ingest.close()
    return out


def _rebuild_collection(paths: Paths, ingest: IngestDB, name: str, why: str) -> list[str]:
    """The last resort: the collection's database is moved aside and rebuilt from its files."""
    db = paths.rag_db(name)
    aside = move_aside(db) if db.exists() else None
    if paths.collection_dir(name).is_dir():
        remove_index_files(paths.collection_dir(name))
    ingest.forget_collection_files(name)
    log.error("database_repaired", database=str(db), problems=[why], moved_to=str(aside) if aside else None)
    return [f"{db}: {why}; it was moved aside{f' to {aside.name}' if aside else ''} and collection '{name}' "
            f"is being indexed again from its files"]


def _check_collection(paths: Paths, ingest: IngestDB, name: str) -> list[str]:
    notes: list[str] = []
    db = paths.rag_db(name)
    rows = ingest.live_files(name)
    known = {r["source_file"] for r in rows}
    live = {r["source_file"]: r["md5"] for r in rows if r["extract_status"] == "done" and r["md5"]}
    if db.exists():
        drop_shm(db)
        problems = quick_check(db, recover=True)
        if problems:
            aside = move_aside(db)
            remove_index_files(paths.collection_dir(name))
            ingest.forget_collection_files(name)
            notes.append(f"{db} was damaged ({'; '.join(problems)}); it was moved aside to {aside.name} and "
                         f"collection '{name}' is being indexed again from its files")
            log.error("database_repaired", database=str(db), problems=problems, moved_to=str(aside))
            return notes
    elif live:
        ingest.forget_collection_files(name)
        notes.append(f"{db} is missing while {len(live)} files were recorded as indexed; collection '{name}' is "
                     f"being indexed again from its files")
        log.error("database_missing", database=str(db), files=len(live))
        return notes
    else:
        return notes
    rag = RagDB(db, name)
    try:
        # Rows a large publish or removal was copying in or deleting when the daemon stopped: out
        # of sight already, gone now (a copy cut off is done again from the file, still queued).
        purged = rag.purge_hidden()
        if purged:
            notes.append(f"{db}: {purged} chunks of an interrupted publish or removal were deleted")
            log.info("hidden_chunks_purged", database=str(db), chunks=purged)
        counts = collection_counts(db)
        if counts.fts_error is not None or counts.fts_rows != counts.chunks:
            rag.rebuild_fts()  # rows back in step with the chunks ...
            rag.rebuild_fts_index()  # ... and the index recomputed from them
            notes.append(f"{db}: the keyword index failed its check ({counts.fts_error or 'row counts differ'}); "
                         f"it was rebuilt from the stored chunk text")
            log.error("fts_rebuilt", database=str(db), error=counts.fts_error, fts_rows=counts.fts_rows,
                      chunks=counts.chunks)
        bad = rag.chunk_text_mismatches(backfill=True)
        if bad:
            # The changed text may sit in a table row whose index entry (or FTS5 terms) still hold
            # the old text: make both agree with the stored rows first, or removing them fails.
            rag.reindex()
            rag.rebuild_fts_index()
            gone, _ = rag.drop_documents(sorted(bad))
            # FTS5 removes a row's terms by re-reading its text: for a changed text it removed the
            # wrong ones, so the keyword index is rebuilt from the (now sound) stored texts.
            rag.rebuild_fts_index()
            ingest.forget_files(name, gone)
            notes.append(f"{db}: the stored text of {len(bad)} documents no longer matched what was indexed; "
                         f"{len(gone)} files are being ingested again from disk")
            log.error("chunk_text_mismatch", database=str(db), documents=len(bad), files=len(gone))
        held = {p: md5 for p, _rel, md5 in rag.document_paths()}
        stale = sorted(p for p, md5 in live.items() if held.get(p) != md5)
        unknown = sorted(p for p in held if p not in known)
        if stale:
            ingest.forget_files(name, stale)
            notes.append(f"{db}: {len(stale)} files recorded as indexed are missing or out of date there; "
                         f"they are being ingested again from disk")
        for p in unknown:
            rag.remove_path(p)  # the scan adds it back if the file is there
        if unknown:
            notes.append(f"{db}: {len(unknown)} paths ingest did not know were removed; the scan adds back "
                         f"those that exist")
        if stale or unknown:
            log.error("ingest_rag_mismatch", database=str(db), stale=len(stale), unknown=len(unknown),
                      examples=(stale + unknown)[:5])
    finally:
        rag.close()
    return notes


def _check_history(paths: Paths, notes: list[str]) -> None:
    db = paths.history_db
    if not db.exists():
        return
    drop_shm(db)
    problems = quick_check(db, recover=True)
    if not problems:
        return
    aside = move_aside(db)
    history = HistoryDB(db)
    try:
        kept = history.copy_salvageable_from(aside)
    finally:
        history.close()
    notes.append(f"{db} was damaged ({'; '.join(problems)}); it was moved aside to {aside.name} and a new "
                 f"history keeps the {kept} entries that could still be read")
    log.error("database_repaired", database=str(db), problems=problems, moved_to=str(aside), salvaged=kept)
