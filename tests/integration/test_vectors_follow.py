"""The embedding stage's claims on pending chunks (ragweedd/ingest/vectorize.py, RagDB.add_vectors)."""

from __future__ import annotations

import numpy as np

from ragweedd.chunk.context import embed_input
from ragweedd.config import load_config
from ragweedd.embed.hashing import HashEmbedder
from ragweedd.ingest.pipeline import Pipeline
from ragweedd.ingest.vectorize import fill_vectors
from ragweedd.paths import Paths
from ragweedd.store.backends import open_data_dir
from ragweedd.store.sqlite.integrity_check import check_collection


def _pipe(tmp_path) -> Pipeline:
    cfg = load_config(text="chunk_size = 64\n[embed]\nmodel = 'hash:64'\n", env={})
    paths = Paths.resolve(str(tmp_path / "data"), str(tmp_path / "state"), str(tmp_path / "cache"))
    return Pipeline(cfg, paths, HashEmbedder(64), defer_vectors=True, stores=open_data_dir(paths))


def _text(tag: str, n: int = 40) -> str:
    return "\n\n".join(f"Paragraph {i} of version {tag} mentions {tag}word{i} among other things." for i in range(n))


def _published(pipe: Pipeline, tmp_path, tag: str):
    """A file published with its vectors pending: (the file, its folder, its collection's RagDB, the
    pending rows as the embedding stage reads them, their vectors)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    f = docs / "doc.txt"
    f.write_text(_text(tag))
    pipe.ingest_file("c", f, docs)
    rag = pipe.rag("c")
    pending = rag.pending_batch(1000)
    return f, docs, rag, pending, HashEmbedder(64).embed_batch([embed_input(t, c) for _, _, t, c in pending])


def test_a_vector_computed_before_an_edit_is_not_given_to_the_chunk_that_reuses_its_id(tmp_path):
    pipe = _pipe(tmp_path)
    try:
        # what the embedding stage read, then embedded
        f, docs, rag, read_before, old_vecs = _published(pipe, tmp_path, "old")
        f.write_text(_text("new"))  # edited while those vectors were computed
        pipe.ingest_file("c", f, docs)
        new_ids = {cid for cid, *_ in rag.pending_batch(1000)}
        assert new_ids & {cid for cid, *_ in read_before}, "no chunk id was reused: the case is not tested"
        written = rag.add_vectors(pipe.index_id, [(cid, emb_id, ctx, old_vecs[i].astype("float32").tobytes())
                                                  for i, (cid, emb_id, _, ctx) in enumerate(read_before)])
        assert written == [], "a vector of the old text was stored for a chunk of the new text"
        fill_vectors(rag, pipe.db, pipe.embedder, pipe.index_id, batch_size=8)
        rows = rag.conn.execute(
            "SELECT v.vec, t.string_value, c.string_value FROM vectors v"
            " JOIN embedding_metadata t ON t.id = v.id AND t.key = 'chroma:document'"
            " LEFT JOIN embedding_metadata c ON c.id = v.id AND c.key = 'context'").fetchall()
        assert len(rows) == len(new_ids)
        for vec, text, ctx in rows:
            want = HashEmbedder(64).embed_batch([embed_input(text, ctx)])[0].astype("float32")
            assert np.allclose(np.frombuffer(vec, dtype=np.float32), want), text[:60]
    finally:
        pipe.close()


def test_integrity_counts_agree_while_vectors_are_written(tmp_path, monkeypatch):
    """Chunks, vectors and pending rows are counted in one snapshot: a batch of vectors committed
    between two of the counts (here forced to land right after the chunk count) must not look like
    damage, which would start a repair."""
    import ragweedd.store.sqlite.checks as integrity

    pipe = _pipe(tmp_path)
    _f, _docs, rag, pending, vecs = _published(pipe, tmp_path, "v")
    assert len(pending) > 4
    real_connect = integrity.connect

    class CommitsBetweenCounts:
        """A connection on which a batch of vectors is committed (by the pipeline's own
        connection) right after the chunks are counted."""

        def __init__(self, conn):
            self.conn = conn

        def execute(self, sql, *args):
            out = self.conn.execute(sql, *args)
            if sql.startswith("SELECT count(*) FROM embeddings"):
                rag.add_vectors(pipe.index_id, [(cid, emb_id, ctx, vecs[i].astype("float32").tobytes())
                                                for i, (cid, emb_id, _, ctx) in enumerate(pending[:4])])
            return out

        def __getattr__(self, name):
            return getattr(self.conn, name)

    monkeypatch.setattr(integrity, "connect", lambda *a, **k: CommitsBetweenCounts(real_connect(*a, **k)))
    res = check_collection(pipe.paths.rag_db("c"))
    pipe.close()
    assert not res["damaged"], res["problems"]
    assert res["pending_vectors"] == len(pending), "the counts did not come from the snapshot before the batch"
