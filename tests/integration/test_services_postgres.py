"""The composition root on a PostgreSQL store: a one-shot command's search and history go to the
database the config names, with vectors ranked by pgvector; what cannot write there yet (the
daemon, an ingest) is refused with a message that names the key and hides the password."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragweedd.config import load_config
from ragweedd.errors import ConfigError
from ragweedd.store.rag_passes import PRIMARY


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
    from ragweedd.store.pg_backend import PgBackend

    cfg = _config(tmp_path, pg_dsn)
    services = open_oneshot(cfg)
    try:
        assert isinstance(services.stores, PgBackend) and services.stores.source == "laptop"
        texts = ["sourdough starter needs feeding twice a day", "the lighthouse keeper's schedule",
                 "green tea inventory for the shop"]
        vecs = embed_texts(services.embedder, texts)
        rag = services.stores.open_rag("notes")
        eid = index_embedder_id(services.embedder.id, cfg.chunk_context)
        rag.publish(md5="a" * 32, source_file="/home/me/notes/n.md", rel_path="n.md", kind="text", extractor="text",
                    ocr_type=None, title=None, size_bytes=100,
                    chunks=[{"chunk_idx": i, "text": t, "meta": {"char_start": 0, "char_end": len(t)}}
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
        from ragweedd.store.pg_history import PgHistory

        assert isinstance(services.history.db, PgHistory)  # the history lives in PostgreSQL too
    finally:
        services.close()


def test_the_daemon_and_ingest_are_refused_on_postgresql_without_showing_the_password(tmp_path):
    from ragweedd.services import open_daemon
    from ragweedd.store.backends import require_local_ingest

    cfg = _config(tmp_path, "postgresql://rw:s3cret@db.invalid/rag")
    with pytest.raises(ConfigError) as e:
        open_daemon(cfg)
    assert "store" in str(e.value) and "s3cret" not in str(e.value) and "rw:***@db.invalid" in str(e.value)
    with pytest.raises(ConfigError):
        require_local_ingest(cfg, "ingest")
    require_local_ingest(_config(tmp_path, "sqlite"), "ingest")  # the default is untouched
