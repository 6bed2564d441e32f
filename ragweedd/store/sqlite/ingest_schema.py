"""The schema of ingest_db.sqlite3, as numbered migrations: the files' rows (IngestDB), the job
queue (JobQueue), the embed cache, the IDF cache and the collections added at run time share the
file, and whichever of them opens it first brings it forward."""

from __future__ import annotations

from ragweedd.store.sqlite.connection import Migration

MIGRATIONS: list[Migration] = [
    (1, "initial", """
CREATE TABLE ingest_files (
    id INTEGER PRIMARY KEY,
    collection TEXT NOT NULL,
    source_file TEXT NOT NULL,
    md5 TEXT,
    size_bytes INTEGER,
    first_seen REAL NOT NULL,
    last_seen REAL NOT NULL,
    chunks INTEGER NOT NULL DEFAULT 0,
    superseded INTEGER NOT NULL DEFAULT 0,
    extract_status TEXT NOT NULL DEFAULT 'pending',
    mtime_ns INTEGER,
    inode INTEGER,
    error TEXT,
    tries INTEGER NOT NULL DEFAULT 0,
    root TEXT,
    updated_at REAL NOT NULL
);
CREATE UNIQUE INDEX ingest_files_live ON ingest_files(collection, source_file) WHERE superseded = 0;
CREATE INDEX ingest_files_md5 ON ingest_files(collection, md5);
CREATE TABLE ingest_chunks (
    collection TEXT NOT NULL,
    md5 TEXT NOT NULL,
    size_bytes INTEGER,
    chunk_idx INTEGER NOT NULL,
    chunk_text TEXT NOT NULL,
    metadata_json TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    embed_status INTEGER NOT NULL DEFAULT 0,
    embed_status_384 INTEGER NOT NULL DEFAULT 0,
    embed_status_1024 INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (collection, md5, chunk_idx)
);
CREATE TABLE collection_chunks (
    md5 TEXT NOT NULL,
    collection TEXT NOT NULL,
    chunks INTEGER NOT NULL,
    ingested_at REAL NOT NULL,
    PRIMARY KEY (md5, collection)
);
CREATE TABLE fts_idf_cache (
    collection TEXT NOT NULL,
    term TEXT NOT NULL,
    doc INTEGER NOT NULL,
    built_at REAL NOT NULL,
    PRIMARY KEY (collection, term)
);
CREATE TABLE embed_cache (
    text_hash TEXT NOT NULL,
    embedder_id TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vec BLOB NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (text_hash, embedder_id)
);
"""),
    # The daemon's durable job queue (one pending job per path: later events coalesce into it) and
    # the collections added at run time through the API.
    (2, "daemon_jobs_and_collections", """
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY,
    collection TEXT NOT NULL,
    path TEXT NOT NULL,
    root TEXT,
    op TEXT NOT NULL CHECK (op IN ('upsert', 'delete')),
    state TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'failed')),
    tries INTEGER NOT NULL DEFAULT 0,
    not_before REAL NOT NULL DEFAULT 0,
    error TEXT,
    enqueued_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE UNIQUE INDEX jobs_path ON jobs(collection, path);
CREATE INDEX jobs_ready ON jobs(state, not_before);
CREATE TABLE daemon_collections (
    name TEXT PRIMARY KEY,
    paths_json TEXT NOT NULL,
    ignore_json TEXT NOT NULL DEFAULT '[]',
    topic TEXT NOT NULL DEFAULT '',
    added_at REAL NOT NULL
);
"""),
    (3, "jobs_claim_order", """
CREATE INDEX jobs_next ON jobs(state, op = 'delete', id);
"""),
    # Status counts live files by state on every call (and each collection's indexed ones): with
    # 200,000 skipped rows that was a scan of the table, 170 + 80 ms; this index answers both.
    (4, "files_by_state", """
CREATE INDEX ingest_files_state ON ingest_files(extract_status, collection) WHERE superseded = 0;
"""),
    # A file's id is its document key in every face: a plain INTEGER PRIMARY KEY gives the highest
    # id again once its row is gone (a removed collection's last files), so a key a user kept would
    # name another file. AUTOINCREMENT never hands an id out twice; SQLite cannot add it to a table,
    # so the table is rebuilt with its rows and indexes.
    (5, "file_ids_never_reused", """
CREATE TABLE ingest_files_new (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    collection TEXT NOT NULL,
    source_file TEXT NOT NULL,
    md5 TEXT,
    size_bytes INTEGER,
    first_seen REAL NOT NULL,
    last_seen REAL NOT NULL,
    chunks INTEGER NOT NULL DEFAULT 0,
    superseded INTEGER NOT NULL DEFAULT 0,
    extract_status TEXT NOT NULL DEFAULT 'pending',
    mtime_ns INTEGER,
    inode INTEGER,
    error TEXT,
    tries INTEGER NOT NULL DEFAULT 0,
    root TEXT,
    updated_at REAL NOT NULL
);
INSERT INTO ingest_files_new (id, collection, source_file, md5, size_bytes, first_seen, last_seen, chunks,
    superseded, extract_status, mtime_ns, inode, error, tries, root, updated_at)
    SELECT id, collection, source_file, md5, size_bytes, first_seen, last_seen, chunks,
    superseded, extract_status, mtime_ns, inode, error, tries, root, updated_at FROM ingest_files;
DROP TABLE ingest_files;
ALTER TABLE ingest_files_new RENAME TO ingest_files;
CREATE UNIQUE INDEX ingest_files_live ON ingest_files(collection, source_file) WHERE superseded = 0;
CREATE INDEX ingest_files_md5 ON ingest_files(collection, md5);
CREATE INDEX ingest_files_state ON ingest_files(extract_status, collection) WHERE superseded = 0;
"""),
]
