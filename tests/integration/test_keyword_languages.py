"""The keyword leg in languages other than English (issue 31), on both storage backends (a real
SQLite file and a real PostgreSQL, tests/pg_fixture.py): a German document is found by an inflected
word, a Chinese one by a two-character word inside a run of Han characters, a Russian one by
another case of its noun; the query is read in the collection's language; an index written by the
English-only code is migrated and then finds the same."""

from __future__ import annotations

import numpy as np
import pytest

from ragweedd.config import load_config
from ragweedd.paths import Paths
from ragweedd.query.fts_plan import keyword_leg
from ragweedd.query.idf import IdfCache
from ragweedd.store.sqlite.backend import SqliteBackend
from ragweedd.store.types import PRIMARY

DOCS = {
    "de": ("Die Häuser der Altstadt wurden im Mittelalter aus Holz gebaut. Später bauten die Bürger "
           "ihre Wohnungen aus Stein, weil Brände die hölzernen Gebäude immer wieder zerstörten."),
    "zh": ("北京大学是中国最早的国立综合性大学，创办于一八九八年，初名京师大学堂。"
           "学校位于北京市海淀区，校园里有未名湖和博雅塔。"),
    "ru": ("Московский метрополитен был открыт в 1935 году. Станции метро украшены мозаиками, "
           "скульптурами и витражами, поэтому их часто называют подземными дворцами."),
    "en": ("The lighthouse keeper climbed the spiral stairs every evening to light the lamp, and "
           "wrote the weather in the logbook before dawn."),
}
# query -> the language of the one document it must find (the words are inflected otherwise
# than in the document, or a part of a longer run of characters)
QUERIES = {
    "Wann wurde das Haus gebaut?": "de",      # Häuser -> Haus (German stems), gebaut as is
    "北京": "zh",                               # a two-character word inside 北京大学是中国...
    "未名湖在哪里": "zh",                        # 未名湖 inside a run; bigrams 未名, 名湖
    "Когда открыли станцию метрополитена?": "ru",  # станции -> станцию, метрополитен -> метрополитена
    "lighthouses": "en",                        # Porter stems, as before
}


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request, tmp_path):
    if request.param == "sqlite":
        return SqliteBackend(Paths(data=tmp_path / "data", state=tmp_path / "state", cache=tmp_path / "cache"))
    from ragweedd.store.postgres.backend import PgBackend

    return PgBackend(request.getfixturevalue("pg_dsn"), source="laptop")


def _publish(rag, md5: str, text: str) -> list[int]:
    vec = (np.ones(4, dtype=np.float32) / 2).tobytes()
    chunks = [{"chunk_idx": 0, "text": text, "context": "", "meta": {"char_start": 0, "char_end": len(text)}}]
    return rag.publish(md5=md5, source_file=f"/r/{md5}.txt", rel_path=f"{md5}.txt", kind="text",
                       extractor="text", ocr_type=None, title=None, size_bytes=len(text), chunks=chunks,
                       vectors={PRIMARY: [vec]}, embedders={PRIMARY: ("hash:4", 4)})


def _search(reader, query: str):
    cfg = load_config(text="synonyms_enabled = false\nfts_min_query_ic = 0.0", env={})
    cache = IdfCache("c", reader, n_docs=reader.chunk_count, seq=reader.max_seq)
    hits, meta, _ = keyword_leg(reader, query, cache, cfg, 10)
    return hits, meta


def test_each_language_is_found_by_its_own_words(backend):
    rag = backend.open_rag("c")
    ids = {lang: _publish(rag, lang * 16, text)[0] for lang, text in DOCS.items()}
    reader = backend.open_keyword_reader("c")
    try:
        assert set(reader.languages()) == set(DOCS)  # each document was read in its language
        for query, lang in QUERIES.items():
            hits, meta = _search(reader, query)
            assert hits and hits[0][0] == ids[lang], (query, meta)
            assert meta["language"] == lang, (query, meta["language"])
    finally:
        reader.close()
        rag.close()


def test_a_query_is_read_in_the_collection_language(backend):
    """A one-word query is too short to tell its language; in a German collection it is German, so
    it is stemmed as the documents were ("Häusern" -> "haus", which Porter would leave whole)."""
    rag = backend.open_rag("c")
    hid = _publish(rag, "d" * 32, DOCS["de"])[0]
    reader = backend.open_keyword_reader("c")
    try:
        hits, meta = _search(reader, "Häusern")
        assert meta["language"] == "de" and [h[0] for h in hits] == [hid]
    finally:
        reader.close()
        rag.close()


def test_an_english_only_sqlite_index_is_migrated(tmp_path):
    """A rag.sqlite3 written before migration 8 (porter unicode61: the German word and the Chinese
    run as they were) is rebuilt on opening, and then finds what the new code finds."""
    from ragweedd.store.sqlite.connection import connect, migrate
    from ragweedd.store.sqlite.rag_db import MIGRATIONS, RagDB

    path = tmp_path / "rag.sqlite3"
    old = connect(path)
    migrate(old, [m for m in MIGRATIONS if m[0] < 8], db_name="old")
    old.execute("INSERT INTO collections(name) VALUES ('c')")
    for i, (lang, text) in enumerate(DOCS.items(), 1):
        old.execute("INSERT INTO embeddings(id, collection_id, embedding_id, md5, chunk_idx, created_at)"
                    " VALUES (?, 1, ?, ?, 0, 0)", (i, f"{lang * 16}:0", lang * 16))
        old.executemany("INSERT INTO embedding_metadata(id, key, string_value) VALUES (?,?,?)",
                        [(i, "chroma:document", text), (i, "source_file_name", f"/r/{lang}.txt")])
        old.execute("INSERT INTO fts_chunks(rowid, embedding_id, content, source_file, context) VALUES (?,?,?,?,'')",
                    (i, f"{lang * 16}:0", text, f"/r/{lang}.txt"))
    # what the old index holds: no Chinese word, no German stem
    assert old.execute("SELECT count(*) FROM fts_chunks WHERE fts_chunks MATCH '\"北京\"'").fetchone()[0] == 0
    old.close()

    rag = RagDB(path, "c")
    try:
        cols = {r[1] for r in rag.conn.execute("PRAGMA table_info(fts_chunks)")}
        assert {"terms", "context_terms", "lang"} <= cols
        assert rag.conn.execute("SELECT number FROM schema_migrations WHERE number = 8").fetchone()
        from ragweedd.store.sqlite.fts_reader import FtsReader

        reader = FtsReader(rag.conn)
        assert set(reader.languages()) == set(DOCS)
        ids = {lang: i for i, lang in enumerate(DOCS, 1)}
        for query, lang in QUERIES.items():
            hits, meta = _search(reader, query)
            assert hits and hits[0][0] == ids[lang], (query, meta)
        # the stored text is untouched: what is cited is what was indexed
        assert rag.conn.execute("SELECT content FROM fts_chunks WHERE rowid = 2").fetchone()[0] == DOCS["zh"]
    finally:
        rag.close()


def test_an_english_only_postgresql_index_is_migrated(pg_dsn):
    """Chunks written under migration 7 (tsv generated by to_tsvector('english')) get their index
    form when a backend first opens the database, and are then found in their languages."""
    import psycopg

    from ragweedd.store.postgres.backend import PgBackend
    from ragweedd.store.postgres.connection import PgConn, migrate
    from ragweedd.store.postgres.pg_schema import MIGRATIONS

    db = PgConn(pg_dsn)
    migrate(db, [m for m in MIGRATIONS if m[0] < 8])
    db.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        cid = conn.execute("INSERT INTO collections(name) VALUES ('c') RETURNING id").fetchone()[0]
        for lang, text in DOCS.items():
            md5 = lang * 16
            conn.execute("INSERT INTO documents(collection_id, md5, kind, chunks, added_at) VALUES (%s,%s,'text',1,0)",
                         (cid, md5))
            conn.execute("INSERT INTO chunks(collection_id, embedding_id, md5, chunk_idx, created_at, content,"
                         " source_file, meta, tokens) VALUES (%s,%s,%s,0,0,%s,%s,'{}',1)",
                         (cid, f"{md5}:0", md5, text, f"/r/{lang}.txt"))
        assert conn.execute("SELECT count(*) FROM chunks WHERE tsv @@ to_tsquery('simple', '北京')").fetchone()[0] == 0
    backend = PgBackend(pg_dsn, source="laptop")
    reader = backend.open_keyword_reader("c")
    try:
        assert set(reader.languages()) == set(DOCS)
        ids = {r["md5"][:2]: int(r["id"]) for r in reader.db.all("SELECT id, md5 FROM chunks")}
        for query, lang in QUERIES.items():
            hits, meta = _search(reader, query)
            assert hits and hits[0][0] == ids[lang], (query, meta)
    finally:
        reader.close()
        backend.close()


def test_sqlite_stores_each_chunk_in_its_documents_language(tmp_path):
    """A short chunk (a heading) of a German document is stemmed as German, not as whatever its
    three words alone look like."""
    backend = SqliteBackend(Paths(data=tmp_path / "data", state=tmp_path / "state", cache=tmp_path / "cache"))
    rag = backend.open_rag("c")
    text = DOCS["de"]
    chunks = [{"chunk_idx": 0, "text": "Bauweise der Altstadt", "context": "", "meta": {}},
              {"chunk_idx": 1, "text": text, "context": "", "meta": {}}]
    vec = (np.ones(4, dtype=np.float32) / 2).tobytes()
    rag.publish(md5="e" * 32, source_file="/r/e.txt", rel_path="e.txt", kind="text", extractor="text",
                ocr_type=None, title=None, size_bytes=1, chunks=chunks, vectors={PRIMARY: [vec, vec]},
                embedders={PRIMARY: ("hash:4", 4)})
    try:
        assert {r[0] for r in rag.conn.execute("SELECT lang FROM fts_chunks")} == {"de"}
    finally:
        rag.close()
