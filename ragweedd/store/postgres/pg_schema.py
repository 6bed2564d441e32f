"""The PostgreSQL schema of ragweedd, as numbered migrations (applied by store/postgres/connection.py ``migrate``).

One database holds every collection (rows carry ``collection_id``), the ingest state, the job
queue and the history. The tables follow rag.sqlite3 (store/sqlite/rag_db.py) with three changes:

* a chunk's text, context, display path and metadata are columns of ``chunks`` (metadata as one
  jsonb), and its keyword index is the tsvector ``tsv`` (context weighted B, text A; written from
  ragweedd's index form since migration 8, store/postgres/pg_terms.py) under a GIN index, where SQLite
  keeps an FTS5 table beside the chunks;
* a path belongs to a source (``source``: the machine or share that holds it, config
  ``source_name``), so a document is (source, path) and two machines' ``~/notes`` stay apart,
  while ``documents`` stays keyed by content MD5 per collection: a copy on another machine is
  linked, not stored or embedded again;
* vectors are pgvector ``vector`` values without a fixed dimension; each (collection, space) gets a
  partial HNSW index on ``vec::vector(dim)`` when its embedder is recorded (pg_rag.py), since
  an HNSW index needs one dimension and spaces of different embedders differ.

The change logs are ``bigserial`` sequences shared by all collections; a writer writes its change
entries (and its path-write entry) as the last statements of its transaction, after taking the
collection's transaction-wide advisory lock, so entries commit in sequence order and a reader that
has seen sequence n never later meets an entry below n, while the work before them runs in
parallel. The extra passes' log (``pass_changes``, written by trigger as the vectors are) has no
such order: it only tells a search cache that something changed.
"""

from __future__ import annotations

from ragweedd.store.postgres import pg_terms
from ragweedd.store.postgres.connection import Migration

MIGRATIONS: list[Migration] = [
    (1, "initial", """
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE collections (
    id serial PRIMARY KEY,
    name text NOT NULL UNIQUE,
    topic text
);
CREATE TABLE documents (
    collection_id integer NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
    md5 text NOT NULL,
    kind text NOT NULL,
    extractor text,
    ocr_type text,
    title text,
    size_bytes bigint,
    chunks integer NOT NULL,
    added_at double precision NOT NULL,
    PRIMARY KEY (collection_id, md5)
);
CREATE TABLE document_paths (
    collection_id integer NOT NULL,
    source text NOT NULL,
    source_file text NOT NULL,
    md5 text NOT NULL,
    rel_path text NOT NULL,
    added_at double precision NOT NULL,
    PRIMARY KEY (collection_id, source, source_file),
    FOREIGN KEY (collection_id, md5) REFERENCES documents(collection_id, md5) ON DELETE CASCADE
);
CREATE INDEX document_paths_md5 ON document_paths(collection_id, md5);
CREATE TABLE chunks (
    id bigserial PRIMARY KEY,
    collection_id integer NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
    embedding_id text NOT NULL,
    md5 text NOT NULL,
    chunk_idx integer NOT NULL,
    created_at double precision NOT NULL,
    text_sha256 text,
    content text NOT NULL,
    context text NOT NULL DEFAULT '',
    source_file text NOT NULL,
    source_rel_path text,
    meta jsonb NOT NULL,
    tokens integer NOT NULL DEFAULT 0,
    tsv tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', context), 'B') || setweight(to_tsvector('english', content), 'A')
    ) STORED,
    UNIQUE (collection_id, embedding_id),
    FOREIGN KEY (collection_id, md5) REFERENCES documents(collection_id, md5) ON DELETE CASCADE
);
CREATE INDEX chunks_md5 ON chunks(collection_id, md5);
CREATE INDEX chunks_tsv ON chunks USING gin(tsv);
CREATE TABLE vectors (
    id bigint NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
    collection_id integer NOT NULL,
    space text NOT NULL,
    embedder_id text NOT NULL,
    vec vector NOT NULL,
    PRIMARY KEY (id, space)
);
CREATE INDEX vectors_space ON vectors(collection_id, space, id);
CREATE TABLE pending_vectors (
    id bigint PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    collection_id integer NOT NULL
);
CREATE INDEX pending_vectors_collection ON pending_vectors(collection_id, id);
CREATE TABLE changes (
    seq bigserial PRIMARY KEY,
    collection_id integer NOT NULL,
    op text NOT NULL CHECK (op IN ('add', 'delete')),
    id bigint NOT NULL,
    at double precision NOT NULL
);
CREATE INDEX changes_collection ON changes(collection_id, seq);
CREATE TABLE pass_changes (
    seq bigserial PRIMARY KEY,
    collection_id integer NOT NULL,
    space text NOT NULL,
    op text NOT NULL CHECK (op IN ('add', 'delete')),
    id bigint NOT NULL
);
CREATE INDEX pass_changes_space ON pass_changes(collection_id, space, seq);
CREATE TABLE embedders (
    collection_id integer NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
    space text NOT NULL,
    embedder_id text NOT NULL,
    dim integer NOT NULL,
    since double precision NOT NULL,
    PRIMARY KEY (collection_id, space)
);
CREATE TABLE path_version (
    collection_id integer PRIMARY KEY,
    n bigint NOT NULL
);
-- Pass vectors log their own adds and deletes (also the cascade of a chunk's delete), as the
-- SQLite triggers of rag migration 5 do; the writer already holds the collection's lock.
CREATE FUNCTION ragweedd_pass_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.space <> 'primary' THEN
            INSERT INTO pass_changes(collection_id, space, op, id) VALUES (NEW.collection_id, NEW.space, 'add', NEW.id);
        END IF;
        RETURN NEW;
    END IF;
    IF OLD.space <> 'primary' THEN
        INSERT INTO pass_changes(collection_id, space, op, id) VALUES (OLD.collection_id, OLD.space, 'delete', OLD.id);
    END IF;
    RETURN OLD;
END $$;
CREATE TRIGGER pass_vector_changed AFTER INSERT OR DELETE ON vectors
    FOR EACH ROW EXECUTE FUNCTION ragweedd_pass_change();
-- Every path write moves the collection's path version (see RagDB.search_version).
CREATE FUNCTION ragweedd_path_version() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE cid integer;
BEGIN
    cid := CASE WHEN TG_OP = 'DELETE' THEN OLD.collection_id ELSE NEW.collection_id END;
    INSERT INTO path_version(collection_id, n) VALUES (cid, 1)
        ON CONFLICT (collection_id) DO UPDATE SET n = path_version.n + 1;
    RETURN NULL;
END $$;
CREATE TRIGGER path_written AFTER INSERT OR UPDATE OR DELETE ON document_paths
    FOR EACH ROW EXECUTE FUNCTION ragweedd_path_version();

CREATE TABLE jobs (
    id bigserial PRIMARY KEY,
    source text NOT NULL,
    collection text NOT NULL,
    path text NOT NULL,
    root text,
    op text NOT NULL CHECK (op IN ('upsert', 'delete')),
    state text NOT NULL CHECK (state IN ('queued', 'running', 'failed')),
    tries integer NOT NULL DEFAULT 0,
    not_before double precision NOT NULL,
    enqueued_at double precision NOT NULL,
    updated_at double precision NOT NULL,
    error text,
    claimed_by text,
    UNIQUE (source, collection, path)
);
CREATE INDEX jobs_next ON jobs(source, state, (op = 'delete'), id);

CREATE TABLE history (
    id text PRIMARY KEY,
    n bigserial NOT NULL,
    kind text NOT NULL,
    query text NOT NULL,
    created_at double precision NOT NULL,
    body_json text NOT NULL
);
CREATE INDEX history_created ON history(created_at, n);
CREATE INDEX history_kind_created ON history(kind, created_at, n);
"""),
    # The IDF cache of the keyword planner (store/postgres/pg_idf.py).
    (2, "idf_cache", """
CREATE TABLE idf_cache (
    collection text NOT NULL,
    term text NOT NULL,
    doc bigint NOT NULL,
    built_at double precision NOT NULL,
    PRIMARY KEY (collection, term)
);
CREATE TABLE idf_cache_meta (
    collection text PRIMARY KEY,
    n bigint NOT NULL,
    seq bigint NOT NULL,
    built_at double precision NOT NULL
);
"""),
    # What ingest knows of each path, per source (store/postgres/pg_ingest.py); the embed cache is shared.
    (3, "ingest", """
CREATE TABLE ingest_files (
    id bigserial PRIMARY KEY,
    source text NOT NULL,
    collection text NOT NULL,
    source_file text NOT NULL,
    md5 text,
    size_bytes bigint,
    first_seen double precision NOT NULL,
    last_seen double precision NOT NULL,
    chunks integer NOT NULL DEFAULT 0,
    superseded integer NOT NULL DEFAULT 0,
    extract_status text NOT NULL DEFAULT 'pending',
    mtime_ns bigint,
    inode bigint,
    error text,
    tries integer NOT NULL DEFAULT 0,
    root text,
    updated_at double precision NOT NULL
);
CREATE UNIQUE INDEX ingest_files_live ON ingest_files(source, collection, source_file) WHERE superseded = 0;
CREATE INDEX ingest_files_md5 ON ingest_files(collection, md5);
CREATE INDEX ingest_files_state ON ingest_files(source, extract_status, collection) WHERE superseded = 0;
CREATE TABLE collection_chunks (
    md5 text NOT NULL,
    collection text NOT NULL,
    chunks integer NOT NULL,
    ingested_at double precision NOT NULL,
    PRIMARY KEY (md5, collection)
);
CREATE TABLE embed_cache (
    text_hash text NOT NULL,
    embedder_id text NOT NULL,
    dim integer NOT NULL,
    vec bytea NOT NULL,
    created_at double precision NOT NULL,
    PRIMARY KEY (text_hash, embedder_id)
);
CREATE TABLE daemon_collections (
    source text NOT NULL,
    name text NOT NULL,
    paths_json text NOT NULL,
    ignore_json text NOT NULL DEFAULT '[]',
    topic text NOT NULL DEFAULT '',
    added_at double precision NOT NULL,
    PRIMARY KEY (source, name)
);
"""),
    # A path write counted in one row per collection made that row a lock every publish of the
    # collection queued on, until its commit: two machines ingesting into one collection went no
    # faster than one. Path writes are logged as entries instead, written with the change entries
    # at the end of the transaction under the collection's lock (pg_rag.py ``_log``).
    (4, "path_changes", """
DROP TRIGGER path_written ON document_paths;
DROP FUNCTION ragweedd_path_version();
CREATE TABLE path_changes (
    seq bigserial PRIMARY KEY,
    collection_id integer NOT NULL
);
CREATE INDEX path_changes_collection ON path_changes(collection_id, seq);
INSERT INTO path_changes(collection_id) SELECT collection_id FROM path_version;
DROP TABLE path_version;
"""),
    # Daemons on several machines each run an embedding stage over the same waiting chunks: a
    # chunk's wait row names the session that took it to embed, so no two embed the same chunk.
    (5, "pending_claims", """
ALTER TABLE pending_vectors ADD COLUMN claimed_by text;
"""),
    # A machine's searches and answers are its user's: the history is kept per source, as the
    # ingest state is, and each machine reads only its own. Rows from before have no known
    # source: they get '' (which no machine uses, as source_name '' means the host name) and
    # are shown to none until an administrator gives them one (docs/postgres.md).
    (6, "history_source", """
ALTER TABLE history ADD COLUMN source text NOT NULL DEFAULT '';
ALTER TABLE history ALTER COLUMN source DROP DEFAULT;
ALTER TABLE history DROP CONSTRAINT history_pkey;
ALTER TABLE history ADD PRIMARY KEY (source, id);
DROP INDEX history_created;
DROP INDEX history_kind_created;
CREATE INDEX history_source_created ON history(source, created_at, n);
CREATE INDEX history_source_kind_created ON history(source, kind, created_at, n);
"""),
    # Conversations (store/postgres/pg_history.py): a thread's row, per source as the history is, and its
    # turns as history rows that name it, numbered from 1.
    (7, "conversations", """
ALTER TABLE history ADD COLUMN conversation_id text;
ALTER TABLE history ADD COLUMN turn integer;
CREATE UNIQUE INDEX history_source_conversation ON history(source, conversation_id, turn)
    WHERE conversation_id IS NOT NULL;
CREATE TABLE conversations (
    source text NOT NULL,
    id text NOT NULL,
    n bigserial NOT NULL,
    title text NOT NULL,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL,
    PRIMARY KEY (source, id)
);
CREATE INDEX conversations_source_updated ON conversations(source, updated_at, n);
"""),
    # Keywords in any language (issue 31): ``tsv`` is written from ragweedd's index form instead
    # of generated by to_tsvector('english'); existing rows get theirs from pg_terms.backfill.
    (8, "multilingual_keywords", pg_terms.MIGRATION_SQL),
]
