"""The keyword rows of rag.sqlite3 in their index form (ragweedd/keyterms.py).

``fts_chunks`` keeps each chunk's text, file and context as they are (UNINDEXED: what briefs,
snippets and the integrity check read) and indexes ``terms`` and ``context_terms``: the index form
of the text and of the context, made in Python (Snowball stems, bigrams for scripts without
spaces, accents folded) and tokenised by FTS5's ``ascii`` tokenizer, which splits them at the
spaces and nothing else that can occur in them. ``lang`` is the language the chunk was read as:
its document's (``keyterms.detect_document``), so a document's short chunks (a heading, a table
row) are stemmed as the rest of it. ``keyword_languages`` counts chunks per language as they are
written (never lowered on delete: it says which stemmers a query may need, and a language that
was once here is a cheap candidate), so a query's language is chosen among the collection's.

Every path that writes keyword rows makes them with ``insert_rows`` or with the SQL functions
registered on the writing connection (``kw_doc_lang(chunk text)``, an aggregate, and
``kw_form(text, lang)``), so the per-document insert, the staged copy of a large document, the
backfill and the migration from the English-only table all make the same form.
"""

from __future__ import annotations

import sqlite3

from ragweedd import keyterms
from ragweedd.store.sqlite.connection import transaction
from ragweedd.store.types import AllOf, KeywordQuery, Terms


def fts5_match(q: KeywordQuery) -> str:
    """The FTS5 MATCH expression of a keyword query: each word or phrase a quoted string (a quote
    inside one doubled, so nothing in it is an operator), joined by AND and OR in parentheses."""
    if isinstance(q, Terms):
        return '"' + " ".join(q.terms).replace('"', '""') + '"'
    joined = (" AND " if isinstance(q, AllOf) else " OR ").join(fts5_match(p) for p in q.parts)
    return f"({joined})"


FTS_COLUMNS = "rowid, embedding_id, content, source_file, context, lang, terms, context_terms"

FTS_DDL = """CREATE VIRTUAL TABLE fts_chunks USING fts5(
    embedding_id UNINDEXED, content UNINDEXED, source_file UNINDEXED, context UNINDEXED, lang UNINDEXED,
    terms, context_terms, tokenize='ascii'
)"""
LANGUAGES_DDL = "CREATE TABLE keyword_languages (lang TEXT PRIMARY KEY, chunks INTEGER NOT NULL)"

# Migration 8 of rag.sqlite3: the table is built again from the stored chunk texts (FTS5 tables
# cannot change their tokenizer or gain columns). One transaction: an index is never half English.
MIGRATION_SQL = f"""
DROP TABLE fts_chunks;
{FTS_DDL};
{LANGUAGES_DDL};
CREATE TEMP TABLE kw_doc_lang (md5 TEXT PRIMARY KEY, lang TEXT NOT NULL);
INSERT INTO temp.kw_doc_lang(md5, lang)
SELECT e.md5, kw_doc_lang(m.string_value) FROM embeddings e
JOIN embedding_metadata m ON m.id = e.id AND m.key = 'chroma:document' GROUP BY e.md5;
INSERT INTO fts_chunks({FTS_COLUMNS})
SELECT id, embedding_id, content, source_file, context, l, kw_form(content, l), kw_form(context, l) FROM (
    SELECT e.id, e.embedding_id,
           coalesce((SELECT string_value FROM embedding_metadata m
                     WHERE m.id = e.id AND m.key = 'chroma:document'), '') AS content,
           coalesce((SELECT string_value FROM embedding_metadata m
                     WHERE m.id = e.id AND m.key = 'source_file_name'), '') AS source_file,
           coalesce((SELECT string_value FROM embedding_metadata m
                     WHERE m.id = e.id AND m.key = 'context'), '') AS context,
           coalesce((SELECT lang FROM temp.kw_doc_lang d WHERE d.md5 = e.md5), '') AS l
    FROM embeddings e
);
DROP TABLE temp.kw_doc_lang;
INSERT INTO keyword_languages(lang, chunks) SELECT lang, count(*) FROM fts_chunks GROUP BY lang;
"""


class _DocumentLanguage:
    """SQL aggregate kw_doc_lang(chunk text): the language of a document from its chunks."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.n = 0

    def step(self, text: str | None) -> None:
        if text and self.n < 4 * keyterms.DOCUMENT_SAMPLE:
            self.texts.append(text)
            self.n += len(text)

    def finalize(self) -> str:
        return keyterms.detect_document(self.texts)


def register(conn: sqlite3.Connection) -> None:
    """The SQL functions every writer of keyword rows uses (deterministic: same text, same form)."""
    conn.create_function("kw_form", 2, lambda t, lang: keyterms.index_form(t or "", lang or ""),
                         deterministic=True)
    conn.create_aggregate("kw_doc_lang", 1, _DocumentLanguage)  # type: ignore[arg-type]


def insert_rows(conn: sqlite3.Connection, rows: list[tuple[int, str, str, str, str]], *, replace: bool = False,
                lang: str | None = None) -> None:
    """Keyword rows for the chunks of one document, (chunk id, embedding_id, text, source file,
    context), in their index form in the document's language (``lang``, else detected), counted
    per language. Inside the caller's transaction."""
    if not rows:
        return
    if lang is None:
        lang = keyterms.detect_document([r[2] for r in rows])
    out = [(rid, eid, text, source, context, lang, keyterms.index_form(text, lang), keyterms.index_form(context, lang))
           for rid, eid, text, source, context in rows]
    langs = {lang: len(out)}
    verb = "INSERT OR REPLACE" if replace else "INSERT"
    conn.executemany(f"{verb} INTO fts_chunks({FTS_COLUMNS}) VALUES (?,?,?,?,?,?,?,?)", out)
    count_languages(conn, langs)


def count_languages(conn: sqlite3.Connection, langs: dict[str, int]) -> None:
    conn.executemany("INSERT INTO keyword_languages(lang, chunks) VALUES (?, ?)"
                     " ON CONFLICT(lang) DO UPDATE SET chunks = chunks + excluded.chunks", list(langs.items()))


def languages(conn: sqlite3.Connection) -> dict[str, int]:
    """{language: chunks written in it} of a collection ({} before migration 8)."""
    try:
        return {str(r[0]): int(r[1]) for r in conn.execute("SELECT lang, chunks FROM keyword_languages")}
    except sqlite3.OperationalError:
        return {}


def rebuild(conn: sqlite3.Connection, batch: int = 1000) -> int:
    """Backfill fts_chunks from stored chunk text, in batches (safe while serving: each batch is
    its own short transaction). Returns the number of rows written."""
    total = 0
    md5s = [r[0] for r in conn.execute("SELECT DISTINCT md5 FROM embeddings ORDER BY md5")]
    i = 0
    while i < len(md5s):
        # whole documents per transaction (a document's chunks share its language), ~batch chunks
        group: dict[str, list[tuple[int, str, str, str, str]]] = {}
        n = 0
        while i < len(md5s) and (n < batch or not group):
            rows = conn.execute(
                "SELECT e.id, e.embedding_id,"
                " (SELECT string_value FROM embedding_metadata WHERE id=e.id AND key='chroma:document'),"
                " (SELECT string_value FROM embedding_metadata WHERE id=e.id AND key='source_file_name'),"
                " (SELECT string_value FROM embedding_metadata WHERE id=e.id AND key='context')"
                " FROM embeddings e WHERE e.md5 = ? ORDER BY e.id", (md5s[i],)).fetchall()
            group[md5s[i]] = [(r[0], r[1], r[2] or "", r[3] or "", r[4] or "") for r in rows]
            n += len(rows)
            i += 1
        with transaction(conn):
            for rows in group.values():
                insert_rows(conn, rows, replace=True)
        total += n
    # Rows are replaced in place rather than the table emptied first, so searches keep finding
    # everything while the backfill runs; FTS rows of chunks that no longer exist go last.
    with transaction(conn):
        conn.execute("DELETE FROM fts_chunks WHERE rowid NOT IN (SELECT id FROM embeddings)")
    return total
