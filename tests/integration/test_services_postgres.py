"""The composition root on a PostgreSQL store: a one-shot command's search and history go to the
database the config names, with vectors ranked by pgvector; what cannot write there yet (the
daemon, an ingest) is refused with a message that names the key and hides the password."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragweedd.config import load_config
from ragweedd.store.types import PRIMARY


def _config(tmp_path: Path, store: str):
    return load_config(text=f"""
data_dir = "{tmp_path / 'data'}"
state_dir = "{tmp_path / 'state'}"
cache_dir = "{tmp_path / 'cache'}"
store = "{store}"
source_name = "laptop"
log_level = "warning"
[embed]
model = "hash:64"
""", env={})


def test_one_shot_search_and_history_on_postgresql(tmp_path, pg_dsn):
    from ragweedd.chunk.context import index_embedder_id
    from ragweedd.embed.long import embed_texts
    from ragweedd.services import open_oneshot
    from ragweedd.store.postgres.backend import PgBackend

    cfg = _config(tmp_path, pg_dsn)
    services = open_oneshot(cfg)
    try:
        assert isinstance(services.stores, PgBackend) and services.stores.source == "laptop"
        texts = ["sourdough starter needs feeding twice a day", "the lighthouse keeper's schedule",
                 "green tea inventory for the shop", "Total assets | 2023: 1,000"]
        vecs = embed_texts(services.embedder, texts)
        rag = services.stores.open_rag("notes")
        eid = index_embedder_id(services.embedder.id, cfg.chunk_context)
        rag.publish(md5="a" * 32, source_file="/home/me/notes/n.md", rel_path="n.md", kind="text", extractor="text",
                    ocr_type=None, title=None, size_bytes=100,
                    chunks=[{"chunk_idx": i, "text": t, "meta": {"char_start": 0, "char_end": len(t),
                                                                 **({"section": "Consolidated Balance Sheets"}
                                                                    if t.startswith("Total") else {})}}
                            for i, t in enumerate(texts)],
                    vectors={PRIMARY: [v.astype("float32").tobytes() for v in vecs]},
                    embedders={PRIMARY: (eid, vecs.shape[1])})
        rag.close()
        for mode in ("hybrid", "dense", "keyword"):
            res = services.search("lighthouse keeper", ["notes"], 2, mode=mode)
            hits = res["results"] if isinstance(res, dict) else res.results
            first = hits[0]
            text = first["text"] if isinstance(first, dict) else first.text
            assert "lighthouse" in text, (mode, hits)
        # a question naming a statement reads it from the document it is about (query/statements.py)
        res = services.search("lighthouse keeper, based on the balance sheet", ["notes"], 3)
        texts_found = [h["text"] if isinstance(h, dict) else h.text for h in res["results"]]
        assert "Total assets | 2023: 1,000" in texts_found, texts_found
        assert res["retrieval_meta"]["named"]["statements"] == ["balance"]
        from ragweedd.store.postgres.pg_history import PgHistory

        assert isinstance(services.history.db, PgHistory)  # the history lives in PostgreSQL too
    finally:
        services.close()


def test_the_daemon_on_an_unreachable_postgresql_says_so_without_showing_the_password(tmp_path):
    from ragweedd.errors import StorageError
    from ragweedd.services import open_daemon

    cfg = _config(tmp_path, "postgresql://rw:s3cret@db.invalid/rag?connect_timeout=3")
    with pytest.raises(StorageError) as e:
        open_daemon(cfg)
    assert "s3cret" not in str(e.value) and "rw:***@db.invalid" in str(e.value), str(e.value)
    assert "cannot connect to PostgreSQL" in str(e.value) and "pgpass" in (e.value.hint or "")


def test_one_shot_ingest_and_search_on_postgresql(tmp_path, pg_dsn, capsys):
    import json

    from ragweedd.cli.command import main
    from ragweedd.store.postgres.backend import PgBackend

    docs = tmp_path / "docs"
    docs.mkdir()
    for i, topic in enumerate(["sourdough starter feeding", "lighthouse keeper schedule", "tea inventory"]):
        (docs / f"n{i}.md").write_text(f"# Note {i}\n\nA note about the {topic}, written for the ingest test.\n")
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'data_dir = "{tmp_path / "data"}"\nstate_dir = "{tmp_path / "state"}"\n'
                   f'cache_dir = "{tmp_path / "cache"}"\nstore = "{pg_dsn}"\nsource_name = "laptop"\n'
                   'log_level = "warning"\n[embed]\nmodel = "hash:64"\n')
    assert main(["--config", str(cfg), "ingest", str(docs), "-c", "notes", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["files"] == {"indexed": 3} and out["chunks_without_vectors"] == 0 and out["embedded"] == 3
    rag = PgBackend(pg_dsn, source="laptop").open_rag("notes")
    try:
        assert rag.document_count() == 3 and rag.pending_summary() == (0, 0) and rag.change_counts_after(0)[0] == 3
        assert sorted(p for p, _, _ in rag.document_paths()) == sorted(str(p) for p in docs.iterdir())
    finally:
        rag.close()
    assert not (tmp_path / "data" / "collections" / "notes").exists()  # nothing went to SQLite files
    for mode in ("dense", "keyword", "hybrid"):
        assert main(["--config", str(cfg), "search", "lighthouse keeper", "-c", "notes", "--mode", mode,
                     "--json"]) == 0
        res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert res["results"][0]["filename"] == "n1.md", mode
    # a second ingest of the same files changes nothing
    assert main(["--config", str(cfg), "ingest", str(docs), "-c", "notes", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["new_chunks"] == 0 and out["embedded"] == 0


def test_reembed_on_the_sqlite_files_says_the_daemon_does_it(tmp_path, capsys):
    from ragweedd.cli.command import main

    cfg = tmp_path / "config.toml"
    cfg.write_text(f'data_dir = "{tmp_path / "data"}"\nstate_dir = "{tmp_path / "state"}"\n'
                   f'cache_dir = "{tmp_path / "cache"}"\n[embed]\nmodel = "hash:64"\n')
    assert main(["--config", str(cfg), "reembed"]) == 2  # a request that cannot be done here
    err = capsys.readouterr().err
    assert "reembed is for a shared PostgreSQL store" in err and "moves to a changed [embed] model by itself" in err


def test_reembed_of_a_collection_the_database_does_not_hold(tmp_path, pg_dsn, capsys):
    from ragweedd.cli.command import main

    cfg = tmp_path / "config.toml"
    cfg.write_text(f'data_dir = "{tmp_path / "data"}"\nstate_dir = "{tmp_path / "state"}"\n'
                   f'cache_dir = "{tmp_path / "cache"}"\nstore = "{pg_dsn}"\n[embed]\nmodel = "hash:64"\n')
    assert main(["--config", str(cfg), "reembed", "-c", "nope"]) == 2
    err = capsys.readouterr().err
    assert "collection 'nope' is not in" in err and "no collection yet" in err
