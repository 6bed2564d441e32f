"""What ingest knows of every path, on PostgreSQL (the twin of store/sqlite/ingest_db.py).

The rows of a path belong to its source (config ``source_name``): only the machine or share that
holds a file can tell its state, so every method reads and writes this source's rows. The embed
cache is shared by all sources: a chunk text embedded on one machine is not embedded again on
another. Rows come back as dicts with paths decoded, read by column name like sqlite3.Row.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any, Sequence

from ragweedd.contract import shown_path
from ragweedd.store.postgres.connection import PgConn, from_pg, maybe_from_pg, to_pg
from ragweedd.store.types import SkippedFile


def _row(r: dict[str, Any] | None) -> dict[str, Any] | None:
    if r is None:
        return None
    out = dict(r)
    if "source_file" in out:
        out["source_file"] = from_pg(out["source_file"])
    if "root" in out:
        out["root"] = maybe_from_pg(out["root"])
    return out


def glob_regex(glob: str) -> str:
    """A POSIX regular expression (PostgreSQL ``~``) matching what an fnmatch glob matches, whole."""
    out, i = ["^"], 0
    while i < len(glob):
        ch = glob[i]
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "[":
            j = i + 1
            if j < len(glob) and glob[j] in "!^":
                j += 1
            if j < len(glob) and glob[j] == "]":
                j += 1
            k = glob.find("]", j)
            if k == -1:
                out.append(r"\[")
            else:
                body = glob[i + 1:k]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = k
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out) + "$"


class PgIngest:
    def __init__(self, dsn: str, *, source: str) -> None:
        self.db = PgConn(dsn)
        self.source = source

    def close(self) -> None:
        self.db.close()

    # --- files ----------------------------------------------------------------------------------
    def live_file(self, collection: str, source_file: str) -> dict[str, Any] | None:
        return _row(self.db.one("SELECT * FROM ingest_files WHERE source=%s AND collection=%s AND source_file=%s"
                                " AND superseded=0", (self.source, collection, to_pg(source_file))))

    def live_files(self, collection: str) -> list[dict[str, Any]]:
        return [_row(r) for r in self.db.all(  # type: ignore[misc]
            "SELECT * FROM ingest_files WHERE source=%s AND collection=%s AND superseded=0", (self.source, collection))]

    def live_stats(self, collection: str) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for r in self.db.all("SELECT source_file, size_bytes, mtime_ns, inode, extract_status, md5, updated_at"
                             " FROM ingest_files WHERE source=%s AND collection=%s AND superseded=0",
                             (self.source, collection)):
            row = _row(r)
            assert row is not None
            out[row["source_file"]] = row
        return out

    def live_paths_under(self, collection: str, prefix: str) -> list[str]:
        base = to_pg(prefix.rstrip(os.sep))
        return [from_pg(r["source_file"]) for r in self.db.all(
            "SELECT source_file FROM ingest_files WHERE source=%s AND collection=%s AND superseded=0"
            " AND source_file COLLATE \"C\" >= %s AND source_file COLLATE \"C\" < %s",
            (self.source, collection, base + os.sep, base + chr(ord(os.sep) + 1)))]

    def is_live(self, collection: str, source_file: str) -> bool:
        return self.live_file(collection, source_file) is not None

    def held_file(self, collection: str, source_file: str) -> bool:
        return self.db.one("SELECT 1 FROM ingest_files WHERE source=%s AND collection=%s AND source_file=%s LIMIT 1",
                           (self.source, collection, to_pg(source_file))) is not None

    def done_count(self, collection: str) -> int:
        return int(self.db.value("SELECT count(*) FROM ingest_files WHERE source=%s AND collection=%s"
                                 " AND superseded=0 AND extract_status='done'", (self.source, collection)))

    def file_by_id(self, file_id: int) -> dict[str, Any] | None:
        return _row(self.db.one("SELECT * FROM ingest_files WHERE id=%s", (file_id,)))

    def live_paths_for_md5(self, collection: str, md5: str) -> list[str]:
        return [from_pg(r["source_file"]) for r in self.db.all(
            "SELECT source_file FROM ingest_files WHERE source=%s AND collection=%s AND md5=%s AND superseded=0"
            " AND extract_status='done'", (self.source, collection, md5))]

    def _has_job(self, c: Any, collection: str, path: str) -> bool:
        return c.execute("SELECT 1 FROM jobs WHERE source=%s AND collection=%s AND path=%s",
                         (self.source, collection, to_pg(path))).fetchone() is not None

    def _insert(self, c: Any, collection: str, path: str, *, md5: str | None, size: int | None, chunks: int,
                status: str, mtime_ns: int | None, inode: int | None, error: str | None, tries: int,
                root: str | None) -> None:
        now = time.time()
        c.execute("INSERT INTO ingest_files(source, collection, source_file, md5, size_bytes, first_seen, last_seen,"
                  " chunks, extract_status, mtime_ns, inode, error, tries, root, updated_at)"
                  " VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                  (self.source, collection, to_pg(path), md5, size, now, now, chunks, status, mtime_ns, inode, error,
                   tries, None if root is None else to_pg(root), now))

    def set_file(self, collection: str, source_file: str, *, md5: str | None, size: int | None,
                 mtime_ns: int | None, inode: int | None, status: str, chunks: int = 0,
                 error: str | None = None, root: str | None = None, tries: int | None = None) -> None:
        now = time.time()
        error = None if error is None else shown_path(error)
        with self.db.tx() as c:
            row = self.live_file(collection, source_file)
            if row is not None and row["md5"] is not None and md5 is not None and row["md5"] != md5:
                c.execute("UPDATE ingest_files SET superseded=1, updated_at=%s WHERE id=%s", (now, row["id"]))
                row = None
            if row is None:
                self._insert(c, collection, source_file, md5=md5, size=size, chunks=chunks, status=status,
                             mtime_ns=mtime_ns, inode=inode, error=error, tries=tries or 0, root=root)
            else:
                c.execute("UPDATE ingest_files SET md5=coalesce(%s, md5), size_bytes=%s, last_seen=%s, chunks=%s,"
                          " extract_status=%s, mtime_ns=%s, inode=%s, error=%s, tries=coalesce(%s, tries),"
                          " root=coalesce(%s, root), updated_at=%s WHERE id=%s",
                          (md5, size, now, chunks, status, mtime_ns, inode, error, tries,
                           None if root is None else to_pg(root), now, row["id"]))

    def record_skipped(self, collection: str, files: Sequence[SkippedFile]) -> list[str]:
        held: list[str] = []
        now = time.time()
        with self.db.tx() as c:
            for f in files:
                row = self.live_file(collection, f.path)
                if self._has_job(c, collection, f.path) or (row is not None and row["extract_status"] != "skipped"):
                    held.append(f.path)
                    continue
                if (row is not None and row["size_bytes"] == f.size and row["mtime_ns"] == f.mtime_ns
                        and row["inode"] == f.inode and row["md5"] == f.md5):
                    continue
                if row is not None and row["md5"] is not None and f.md5 is not None and row["md5"] != f.md5:
                    c.execute("UPDATE ingest_files SET superseded=1, updated_at=%s WHERE id=%s", (now, row["id"]))
                    row = None
                if row is None:
                    self._insert(c, collection, f.path, md5=f.md5, size=f.size, chunks=0, status="skipped",
                                 mtime_ns=f.mtime_ns, inode=f.inode, error=shown_path(f.reason), tries=0, root=f.root)
                else:
                    c.execute("UPDATE ingest_files SET md5=coalesce(%s, md5), size_bytes=%s, last_seen=%s, chunks=0,"
                              " extract_status='skipped', mtime_ns=%s, inode=%s, error=%s, root=coalesce(%s, root),"
                              " updated_at=%s WHERE id=%s",
                              (f.md5, f.size, now, f.mtime_ns, f.inode, shown_path(f.reason),
                               None if f.root is None else to_pg(f.root), now, row["id"]))
        return held

    def forget_skipped(self, collection: str, source_files: Sequence[str]) -> list[str]:
        held: list[str] = []
        with self.db.tx() as c:
            for p in source_files:
                row = self.live_file(collection, p)
                if self._has_job(c, collection, p) or row is None or row["extract_status"] != "skipped":
                    held.append(p)
                    continue
                c.execute("UPDATE ingest_files SET superseded=1, extract_status='deleted', updated_at=%s WHERE id=%s",
                          (time.time(), row["id"]))
        return held

    def mark_deleted(self, collection: str, source_file: str) -> str | None:
        with self.db.tx() as c:
            row = self.live_file(collection, source_file)
            if row is None:
                return None
            c.execute("UPDATE ingest_files SET superseded=1, extract_status='deleted', updated_at=%s WHERE id=%s",
                      (time.time(), row["id"]))
            return row["md5"]

    def forget_files(self, collection: str, source_files: Sequence[str]) -> int:
        n = 0
        with self.db.tx() as c:
            for p in source_files:
                n += c.execute("UPDATE ingest_files SET superseded=1, extract_status='deleted', updated_at=%s"
                               " WHERE source=%s AND collection=%s AND source_file=%s AND superseded=0",
                               (time.time(), self.source, collection, to_pg(p))).rowcount
        return n

    def collections_with_files(self) -> list[str]:
        return [r["collection"] for r in self.db.all(
            "SELECT DISTINCT collection FROM ingest_files WHERE source=%s AND superseded=0 ORDER BY collection",
            (self.source,))]

    def counts_by_state(self, collection: str | None = None) -> dict[str, int]:
        q, args = "WHERE source=%s AND superseded=0", [self.source]
        if collection:
            q += " AND collection=%s"
            args.append(collection)
        return {r["extract_status"]: int(r["n"]) for r in self.db.all(
            f"SELECT extract_status, count(*) AS n FROM ingest_files {q} GROUP BY extract_status", args)}

    def record_collection_chunks(self, collection: str, md5: str, chunks: int) -> None:
        self.db.run("INSERT INTO collection_chunks(md5, collection, chunks, ingested_at) VALUES (%s,%s,%s,%s)"
                    " ON CONFLICT (md5, collection) DO UPDATE SET chunks=excluded.chunks,"
                    " ingested_at=excluded.ingested_at", (md5, collection, chunks, time.time()))

    def forget_collection_chunks(self, collection: str, md5: str) -> None:
        self.db.run("DELETE FROM collection_chunks WHERE md5=%s AND collection=%s", (md5, collection))

    def forget_collection_files(self, collection: str, *, also_collection: bool = False) -> None:
        with self.db.tx() as c:
            if also_collection:
                c.execute("DELETE FROM daemon_collections WHERE source=%s AND name=%s", (self.source, collection))
            c.execute("DELETE FROM ingest_files WHERE source=%s AND collection=%s", (self.source, collection))
            c.execute("DELETE FROM collection_chunks WHERE collection=%s", (collection,))

    def forget_removed_collection(self, collection: str) -> None:
        with self.db.tx() as c:
            c.execute("DELETE FROM jobs WHERE source=%s AND collection=%s", (self.source, collection))
            c.execute("DELETE FROM daemon_collections WHERE source=%s AND name=%s", (self.source, collection))
            c.execute("DELETE FROM ingest_files WHERE source=%s AND collection=%s", (self.source, collection))
            c.execute("DELETE FROM collection_chunks WHERE collection=%s", (collection,))

    # --- collections added at run time --------------------------------------------------------------
    def run_time_collections(self) -> list[tuple[str, list[str], list[str], str]]:
        return [(r["name"], json.loads(r["paths_json"]), json.loads(r["ignore_json"]), r["topic"])
                for r in self.db.all("SELECT * FROM daemon_collections WHERE source=%s ORDER BY name", (self.source,))]

    def save_collection(self, name: str, paths: Sequence[str], ignore: Sequence[str], topic: str) -> None:
        self.db.run("INSERT INTO daemon_collections(source, name, paths_json, ignore_json, topic, added_at)"
                    " VALUES (%s,%s,%s,%s,%s,%s) ON CONFLICT (source, name) DO UPDATE SET"
                    " paths_json=excluded.paths_json, ignore_json=excluded.ignore_json, topic=excluded.topic,"
                    " added_at=excluded.added_at",
                    (self.source, name, json.dumps(list(paths)), json.dumps(list(ignore)), topic, time.time()))

    # --- embed cache (shared by every source) ------------------------------------------------------
    def cached_vectors(self, embedder_id: str, text_hashes: list[str]) -> dict[str, bytes]:
        return {r["text_hash"]: bytes(r["vec"]) for r in self.db.all(
            "SELECT text_hash, vec FROM embed_cache WHERE embedder_id=%s AND text_hash = ANY(%s)",
            (embedder_id, list(text_hashes)))}

    def store_vectors(self, embedder_id: str, dim: int, items: list[tuple[str, bytes]]) -> None:
        now = time.time()
        with self.db.tx() as c:
            c.cursor().executemany(
                "INSERT INTO embed_cache(text_hash, embedder_id, dim, vec, created_at) VALUES (%s,%s,%s,%s,%s)"
                " ON CONFLICT (text_hash, embedder_id) DO UPDATE SET dim=excluded.dim, vec=excluded.vec,"
                " created_at=excluded.created_at", [(h, embedder_id, dim, v, now) for h, v in items])

    # --- listings for the faces -----------------------------------------------------------------------
    def live_files_page(self, *, collection: str | None, states: list[str] | None, path_glob: str | None,
                        offset: int, limit: int) -> tuple[list[dict[str, Any]], int]:
        """As IngestDB.live_files_page; the glob is matched against the stored name (a name with
        undecodable bytes is matched in its stored form, not as shown)."""
        where, args = ["source=%s", "superseded=0"], [self.source]
        if collection:
            where.append("collection=%s")
            args.append(collection)
        if states is not None:
            where.append("extract_status = ANY(%s)")
            args.append(list(states))  # type: ignore[arg-type]
        if path_glob:
            rx = glob_regex(path_glob)
            where.append("(source_file ~ %s OR source_file ~ %s)")
            args.extend([rx, "^.*/" + rx[1:]])
        cond = " AND ".join(where)
        total = int(self.db.value(f"SELECT count(*) FROM ingest_files WHERE {cond}", args))
        rows = [_row(r) for r in self.db.all(f"SELECT * FROM ingest_files WHERE {cond}"
                                             " ORDER BY collection, source_file COLLATE \"C\" LIMIT %s OFFSET %s",
                                             [*args, limit, offset])]
        return rows, total  # type: ignore[return-value]

    def job_depth(self, collection: str | None = None) -> dict[str, int]:
        q, args = "WHERE source=%s", [self.source]
        if collection:
            q += " AND collection=%s"
            args.append(collection)
        return {r["state"]: int(r["n"]) for r in self.db.all(
            f"SELECT state, count(*) AS n FROM jobs {q} GROUP BY state", args)}

    def failed_jobs(self, limit: int) -> list[dict]:
        return [{**r, "path": from_pg(r["path"])} for r in self.db.all(
            "SELECT collection, path, op, tries, error FROM jobs WHERE source=%s AND state='failed'"
            " ORDER BY id LIMIT %s", (self.source, limit))]
