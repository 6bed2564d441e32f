"""ingest_db.sqlite3: ingest tracking shared by all collections (DESIGN §3).

Names of the original RAGWeed schema are kept (ingest_files, ingest_chunks, collection_chunks,
fts_idf_cache). Added: per-path stat identity (mtime_ns, inode) for reconciliation, per-file state
and error, the embed cache keyed by chunk-text hash + embedder id, which makes embedding resumable
and lets a modified file re-embed only the chunks whose text changed. ``ingest_chunks`` keeps the
original design's shape but is not written: the embed cache already records, batch by batch, which
chunk texts have vectors, so a per-chunk status would only repeat it.

A path has at most one live row (superseded = 0). When its content changes, the old row is marked
superseded and a new one added; a deleted path's row is superseded with extract_status 'deleted'.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Sequence

from ragweedd.contract import shown_path
from ragweedd.store.pathnames import from_db, shown_stored_path, to_db
from ragweedd.store.pathnames import row as path_row
from ragweedd.store.sqlite.connection import connect, migrate, transaction, write
from ragweedd.store.sqlite.ingest_schema import MIGRATIONS
from ragweedd.store.sqlite.job_queue import failed_jobs, job_depth
from ragweedd.store.types import SkippedFile


def has_job(conn: sqlite3.Connection, collection: str, path: str) -> bool:
    """A job (queued, running or failed) exists for the path (the jobs table shares this file)."""
    return conn.execute("SELECT 1 FROM jobs WHERE collection=? AND path=?",
                        (collection, to_db(path))).fetchone() is not None


class IngestDB:
    def __init__(self, path: Path | str, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.conn = connect(self.path, readonly=readonly)
        self.conn.create_function("shown_path", 1, shown_stored_path, deterministic=True)
        if not readonly:
            migrate(self.conn, MIGRATIONS, db_name=str(self.path))

    def close(self) -> None:
        self.conn.close()

    # --- files ----------------------------------------------------------------------------
    def live_file(self, collection: str, source_file: str) -> sqlite3.Row | None:
        return path_row(self.conn.execute(
            "SELECT * FROM ingest_files WHERE collection=? AND source_file=? AND superseded=0",
            (collection, to_db(source_file)),
        ).fetchone())

    def live_files(self, collection: str) -> list[sqlite3.Row]:
        return [path_row(r) for r in self.conn.execute(
            "SELECT * FROM ingest_files WHERE collection=? AND superseded=0", (collection,))]

    def live_stats(self, collection: str) -> dict[str, sqlite3.Row]:
        """path -> (source_file, size_bytes, mtime_ns, inode, extract_status, md5, updated_at) of every live row:
        what a reconciliation scan compares the disk with, read in one query."""
        return {from_db(r["source_file"]): path_row(r, ("source_file",)) for r in self.conn.execute(
            "SELECT source_file, size_bytes, mtime_ns, inode, extract_status, md5, updated_at FROM ingest_files"
            " WHERE collection=? AND superseded=0", (collection,))}

    def live_paths_under(self, collection: str, prefix: str) -> list[str]:
        """Live paths strictly inside folder ``prefix``."""
        # A range of stored forms, not LIKE: LIKE stops at the NUL of an escaped name and ignores
        # case; every stored path that starts with "<folder>/" sorts in ["<folder>/", "<folder>0").
        base = to_db(prefix.rstrip(os.sep))
        return [from_db(r[0]) for r in self.conn.execute(
            "SELECT source_file FROM ingest_files WHERE collection=? AND superseded=0"
            " AND source_file >= ? AND source_file < ?", (collection, base + os.sep, base + chr(ord(os.sep) + 1)))]

    def is_live(self, collection: str, source_file: str) -> bool:
        return self.conn.execute(
            "SELECT 1 FROM ingest_files WHERE collection=? AND source_file=? AND superseded=0",
            (collection, to_db(source_file))).fetchone() is not None

    def held_file(self, collection: str, source_file: str) -> bool:
        """A row for this exact path, live or superseded: the path was a file of the collection."""
        return self.conn.execute(
            "SELECT 1 FROM ingest_files WHERE collection=? AND source_file=? LIMIT 1",
            (collection, to_db(source_file))).fetchone() is not None

    def done_count(self, collection: str) -> int:
        """Live files of the collection that are indexed."""
        return self.conn.execute("SELECT count(*) FROM ingest_files WHERE collection=? AND superseded=0"
                                 " AND extract_status='done'", (collection,)).fetchone()[0]

    def file_by_id(self, file_id: int) -> sqlite3.Row | None:
        """One ingest_files row (live or not) by its id: the document key of the API."""
        return path_row(self.conn.execute("SELECT * FROM ingest_files WHERE id=?", (file_id,)).fetchone())

    def live_paths_for_md5(self, collection: str, md5: str) -> list[str]:
        rows = self.conn.execute(
            "SELECT source_file FROM ingest_files WHERE collection=? AND md5=? AND superseded=0 "
            "AND extract_status='done'", (collection, md5),
        )
        return [from_db(r[0]) for r in rows]

    def set_file(self, collection: str, source_file: str, *, md5: str | None, size: int | None,
                 mtime_ns: int | None, inode: int | None, status: str, chunks: int = 0,
                 error: str | None = None, root: str | None = None, tries: int | None = None) -> None:
        """Record the live state of a path; a different md5 supersedes the old row."""
        now = time.time()
        stored, root = to_db(source_file), None if root is None else to_db(root)
        error = None if error is None else shown_path(error)  # a message may quote an odd name
        with transaction(self.conn):
            row = self.live_file(collection, source_file)
            if row is not None and row["md5"] is not None and md5 is not None and row["md5"] != md5:
                self.conn.execute("UPDATE ingest_files SET superseded=1, updated_at=? WHERE id=?", (now, row["id"]))
                row = None
            if row is None:
                self.conn.execute(
                    "INSERT INTO ingest_files(collection, source_file, md5, size_bytes, first_seen, last_seen,"
                    " chunks, extract_status, mtime_ns, inode, error, tries, root, updated_at)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (collection, stored, md5, size, now, now, chunks, status, mtime_ns, inode, error,
                     tries or 0, root, now),
                )
            else:
                self.conn.execute(
                    "UPDATE ingest_files SET md5=coalesce(?, md5), size_bytes=?, last_seen=?, chunks=?,"
                    " extract_status=?, mtime_ns=?, inode=?, error=?, tries=coalesce(?, tries),"
                    " root=coalesce(?, root), updated_at=? WHERE id=?",
                    (md5, size, now, chunks, status, mtime_ns, inode, error, tries, root, now, row["id"]),
                )

    def record_skipped(self, collection: str, files: Sequence[SkippedFile]) -> list[str]:
        """Record ``files`` as skipped, in one transaction, exactly as the pipeline would, without
        a job each. Returns the paths it left alone because only the pipeline may settle them: a
        job for the path is queued or running (it decides from what is on disk when it runs), or
        the path's live row is not a skip (indexed content must leave the index, an unfinished
        ingest must finish). A path whose skipped row already has this stat is not touched."""
        held: list[str] = []
        now = time.time()
        with transaction(self.conn):
            for f in files:
                if has_job(self.conn, collection, f.path):
                    held.append(f.path)
                    continue
                row = self.live_file(collection, f.path)
                if row is not None and row["extract_status"] != "skipped":
                    held.append(f.path)
                    continue
                if (row is not None and row["size_bytes"] == f.size and row["mtime_ns"] == f.mtime_ns
                        and row["inode"] == f.inode and row["md5"] == f.md5):
                    continue
                if row is not None and row["md5"] is not None and f.md5 is not None and row["md5"] != f.md5:
                    self.conn.execute("UPDATE ingest_files SET superseded=1, updated_at=? WHERE id=?", (now, row["id"]))
                    row = None
                if row is None:
                    self.conn.execute(
                        "INSERT INTO ingest_files(collection, source_file, md5, size_bytes, first_seen, last_seen,"
                        " chunks, extract_status, mtime_ns, inode, error, tries, root, updated_at)"
                        " VALUES (?,?,?,?,?,?,0,'skipped',?,?,?,0,?,?)",
                        (collection, to_db(f.path), f.md5, f.size, now, now, f.mtime_ns, f.inode,
                         shown_path(f.reason), None if f.root is None else to_db(f.root), now))
                else:
                    self.conn.execute(
                        "UPDATE ingest_files SET md5=coalesce(?, md5), size_bytes=?, last_seen=?, chunks=0,"
                        " extract_status='skipped', mtime_ns=?, inode=?, error=?, root=coalesce(?, root),"
                        " updated_at=? WHERE id=?",
                        (f.md5, f.size, now, f.mtime_ns, f.inode, shown_path(f.reason),
                         None if f.root is None else to_db(f.root), now, row["id"]))
        return held

    def forget_skipped(self, collection: str, source_files: Sequence[str]) -> list[str]:
        """Mark the live 'skipped' rows of paths that are gone as deleted, in one transaction, as the
        pipeline would (such a row has no content in the index to remove). Returns the paths left to
        the pipeline: a job exists for the path, or it has no live row or one that is not a skip."""
        held: list[str] = []
        now = time.time()
        with transaction(self.conn):
            for p in source_files:
                if has_job(self.conn, collection, p):
                    held.append(p)
                    continue
                row = self.live_file(collection, p)
                if row is None or row["extract_status"] != "skipped":
                    held.append(p)
                    continue
                self.conn.execute("UPDATE ingest_files SET superseded=1, extract_status='deleted', updated_at=?"
                                  " WHERE id=?", (now, row["id"]))
        return held

    def mark_deleted(self, collection: str, source_file: str) -> str | None:
        """Supersede the live row of a path; returns its md5."""
        with transaction(self.conn):
            row = self.live_file(collection, source_file)
            if row is None:
                return None
            self.conn.execute(
                "UPDATE ingest_files SET superseded=1, extract_status='deleted', updated_at=? WHERE id=?",
                (time.time(), row["id"]),
            )
            return row["md5"]

    def forget_files(self, collection: str, source_files: Sequence[str]) -> int:
        """Supersede the live rows of paths whose indexed content was lost or damaged, so the next
        scan finds them as new and ingests them again from disk. Returns how many were live."""
        n = 0
        with transaction(self.conn):
            for p in source_files:
                n += self.conn.execute(
                    "UPDATE ingest_files SET superseded=1, extract_status='deleted', updated_at=?"
                    " WHERE collection=? AND source_file=? AND superseded=0",
                    (time.time(), collection, to_db(p))).rowcount
        return n

    def collections_with_files(self) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT DISTINCT collection FROM ingest_files WHERE superseded=0 ORDER BY collection")]

    def copy_salvageable_from(self, damaged: Path | str) -> dict[str, int]:
        """Copy what can still be read from a damaged ingest_db into this (new) one: the collections
        added at run time and the embed cache. Everything else (paths, jobs) is rebuilt by the
        start-up scan. Returns rows copied per table; a table that cannot be read is skipped."""
        out: dict[str, int] = {}
        src = connect(damaged, readonly=True)
        try:
            for table in ("daemon_collections", "embed_cache"):
                try:
                    cols = [r[1] for r in src.execute(f"PRAGMA table_info({table})")]
                    mine = {r[1] for r in self.conn.execute(f"PRAGMA table_info({table})")}
                    cols = [c for c in cols if c in mine]
                    if not cols:
                        continue
                    rows = src.execute(f"SELECT {','.join(cols)} FROM {table}").fetchall()
                    with transaction(self.conn):
                        self.conn.executemany(
                            f"INSERT OR IGNORE INTO {table}({','.join(cols)}) VALUES ({','.join('?' * len(cols))})",
                            [tuple(r) for r in rows])
                    out[table] = len(rows)
                except sqlite3.DatabaseError:
                    out[table] = -1
        finally:
            src.close()
        return out

    def counts_by_state(self, collection: str | None = None) -> dict[str, int]:
        q = "SELECT extract_status, count(*) FROM ingest_files WHERE superseded=0"
        args: tuple = ()
        if collection:
            q += " AND collection=?"
            args = (collection,)
        return {r[0]: r[1] for r in self.conn.execute(q + " GROUP BY extract_status", args)}

    def record_collection_chunks(self, collection: str, md5: str, chunks: int) -> None:
        write(self.conn, "INSERT OR REPLACE INTO collection_chunks(md5, collection, chunks, ingested_at)"
                         " VALUES (?,?,?,?)", (md5, collection, chunks, time.time()))

    def forget_collection_chunks(self, collection: str, md5: str) -> None:
        write(self.conn, "DELETE FROM collection_chunks WHERE md5=? AND collection=?", (md5, collection))

    def forget_collection_files(self, collection: str, *, also_collection: bool = False) -> None:
        """Drop what ingest knows of a collection's files (and, with ``also_collection``, the
        collection itself when it was added at run time)."""
        with transaction(self.conn):
            if also_collection:
                self.conn.execute("DELETE FROM daemon_collections WHERE name=?", (collection,))
            self.conn.execute("DELETE FROM ingest_files WHERE collection=?", (collection,))
            self.conn.execute("DELETE FROM collection_chunks WHERE collection=?", (collection,))

    # --- collections added at run time ------------------------------------------------------------
    def run_time_collections(self) -> list[tuple[str, list[str], list[str], str]]:
        """(name, paths, ignore patterns, topic) of the collections added through the API."""
        return [(r["name"], json.loads(r["paths_json"]), json.loads(r["ignore_json"]), r["topic"])
                for r in self.conn.execute("SELECT * FROM daemon_collections ORDER BY name")]

    def save_collection(self, name: str, paths: Sequence[str], ignore: Sequence[str], topic: str) -> None:
        write(self.conn, "INSERT OR REPLACE INTO daemon_collections(name, paths_json, ignore_json, topic, added_at)"
                         " VALUES (?,?,?,?,?)", (name, json.dumps(list(paths)), json.dumps(list(ignore)), topic,
                                                 time.time()))

    # --- embed cache ----------------------------------------------------------------------------
    def cached_vectors(self, embedder_id: str, text_hashes: list[str]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for i in range(0, len(text_hashes), 500):
            part = text_hashes[i:i + 500]
            q = ",".join("?" * len(part))
            for r in self.conn.execute(
                f"SELECT text_hash, vec FROM embed_cache WHERE embedder_id=? AND text_hash IN ({q})",
                (embedder_id, *part),
            ):
                out[r[0]] = r[1]
        return out

    def store_vectors(self, embedder_id: str, dim: int, items: list[tuple[str, bytes]]) -> None:
        """Cache one batch, committed at once: a crash keeps every batch already embedded."""
        now = time.time()
        with transaction(self.conn):
            self.conn.executemany(
                "INSERT OR REPLACE INTO embed_cache(text_hash, embedder_id, dim, vec, created_at) VALUES (?,?,?,?,?)",
                [(h, embedder_id, dim, v, now) for h, v in items],
            )

    # --- listings for the faces -------------------------------------------------------------------
    def live_files_page(self, *, collection: str | None, states: list[str] | None, path_glob: str | None,
                        offset: int, limit: int) -> tuple[list[sqlite3.Row], int]:
        """One page of live files (ordered by collection, path) and the number of all that match.
        ``path_glob`` is an fnmatch-style glob matched against the whole path or the file name."""
        where: list[str] = ["superseded=0"]
        args: list[object] = []
        if collection:
            where.append("collection=?")
            args.append(collection)
        if states is not None:
            where.append(f"extract_status IN ({','.join('?' * len(states)) or 'NULL'})")
            args.extend(states)
        if path_glob:
            g = path_glob.replace("[!", "[^")  # fnmatch's negated class is GLOB's [^...]
            # A stored name with escaped bytes (a NUL, found by instr on its bytes) is matched as it
            # is shown (\\xNN): GLOB would stop at the NUL.
            name = "CASE WHEN instr(CAST(source_file AS BLOB), x'00') THEN shown_path(source_file) ELSE source_file END"
            where.append(f"({name} GLOB ? OR {name} GLOB ?)")
            args.extend([g, "*/" + g])
        cond = " AND ".join(where)
        total = self.conn.execute(f"SELECT count(*) FROM ingest_files WHERE {cond}", args).fetchone()[0]
        rows = [path_row(r) for r in self.conn.execute(f"SELECT * FROM ingest_files WHERE {cond} ORDER BY collection,"
                                                  " source_file LIMIT ? OFFSET ?", [*args, limit, offset])]
        return rows, total

    def job_depth(self, collection: str | None = None) -> dict[str, int]:
        return job_depth(self.conn, collection)

    def failed_jobs(self, limit: int) -> list[dict]:
        return failed_jobs(self.conn, limit)

    def forget_removed_collection(self, collection: str) -> None:
        """Drop a removed collection's queued and running jobs, its file rows and its registration
        in one transaction: a removal leaves no orphan job or ingest_files row."""
        with transaction(self.conn):
            self.conn.execute("DELETE FROM jobs WHERE collection=?", (collection,))
            self.conn.execute("DELETE FROM daemon_collections WHERE name=?", (collection,))
            self.conn.execute("DELETE FROM ingest_files WHERE collection=?", (collection,))
            self.conn.execute("DELETE FROM collection_chunks WHERE collection=?", (collection,))
