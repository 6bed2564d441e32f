"""Extra embedding passes (multi_embed_384 / multi_embed_1024) end to end: the primary is the hash
embedder, the passes are Ollama models served by the local wire-protocol server
(tests/fakes/llm_server.py) and reached through the real OllamaEmbedder."""

from __future__ import annotations

import numpy as np
import pytest
from structlog.testing import capture_logs

from ragweedd.chunk.context import index_embedder_id
from ragweedd.config import load_config
from ragweedd.embed.hashing import HashEmbedder
from ragweedd.index.manager import IndexManager
from ragweedd.index.sync import IndexSync
from ragweedd.ingest.pipeline import Pipeline
from ragweedd.ingest.vectorize import Vectorizer, open_passes
from ragweedd.paths import Paths
from ragweedd.query.filters import Filters
from ragweedd.query.hybrid import Searcher
from ragweedd.query.vectors import VectorSearch
from ragweedd.store.backends import open_data_dir
from ragweedd.store.sqlite.rag_db import RagDB
from ragweedd.store.types import PRIMARY
from tests.fakes.llm_server import FakeLLMServer

PRIMARY_DIM = 64


def _cfg(url: str, extra: str = "", embed_extra: str = "", **keys: str):
    lines = [f"{k} = {v!r}" for k, v in keys.items()]
    text = "\n".join(lines) + f"\nhnsw_exact_below = 0\n{extra}\n"
    text += f"[embed]\nmodel = 'hash:{PRIMARY_DIM}'\nollama_url = '{url}'\n{embed_extra}\n"
    return load_config(text=text, env={})


def _paths(tmp_path):
    return Paths.resolve(str(tmp_path / "d"), str(tmp_path / "s"), str(tmp_path / "c")).ensure()


def _ingest(cfg, paths, docs, passes, files: dict[str, str], collection="c"):
    """Publish the files, then run the embedding stage until every vector is written."""
    docs.mkdir(exist_ok=True)
    emb = HashEmbedder(PRIMARY_DIM)
    pipe = Pipeline(cfg, paths, emb, defer_vectors=True, stores=open_data_dir(paths))
    vec = Vectorizer(cfg, paths, emb, index_embedder_id(emb.id, cfg.chunk_context),
                     collections=lambda: [collection], on_changes=lambda name: None, passes=passes,
                     stores=open_data_dir(paths))
    vec.start()
    try:
        for name, text in files.items():
            (docs / name).write_text(text)
            pipe.ingest_file(collection, docs / name, docs)
            vec.notify(collection)
        assert vec.drain() is None
    finally:
        vec.stop()
        pipe.close()
    return vec


def _counts(paths, collection="c"):
    rag = RagDB(paths.rag_db(collection), collection, readonly=True)
    try:
        by_space = dict(rag.conn.execute("SELECT space, count(*) FROM vectors GROUP BY space").fetchall())
        return rag.chunk_count(), by_space, rag.embedder("384"), rag.embedder("1024")
    finally:
        rag.close()


NOTES = {f"n{i}.txt": f"Note {i} about topic t{i} and the word w{i % 3}." for i in range(12)}


def test_a_configured_pass_writes_its_vectors_and_index_files_beside_the_primary(tmp_path):
    with FakeLLMServer(embed_dims={"all-minilm": 384}) as srv:
        cfg = _cfg(srv.url, multi_embed_384="ollama:all-minilm")
        paths = _paths(tmp_path)
        passes = open_passes(cfg, HashEmbedder(PRIMARY_DIM))
        assert [p.space for p in passes.working()] == ["384"] and passes.degraded() == []
        vec = _ingest(cfg, paths, tmp_path / "docs", passes, NOTES)
        chunks, by_space, e384, e1024 = _counts(paths)
        assert chunks == 12 and by_space == {PRIMARY: 12, "384": 12}
        assert e384 is not None and e384[0].startswith("ollama:all-minilm@") and e384[1] == 384 and e1024 is None
        # the pass's vectors are the model's (unit length), keyed by chunk like the primary's
        rag = RagDB(paths.rag_db("c"), "c", readonly=True)
        v = np.frombuffer(next(iter(rag.vectors_for([1], "384").values())), dtype=np.float32)
        assert v.shape == (384,) and abs(float(np.linalg.norm(v)) - 1) < 1e-5
        rag.close()
        info = passes.info()[0]
        assert (info["state"], info["vectors"], info["pending_chunks"], info["dim"]) == ("ok", 12, 0, 384)
        assert vec.passes is passes

        sync = IndexSync(cfg, paths, PRIMARY_DIM, passes.dims(), stores=open_data_dir(paths))
        sync.sync("c")
        sync.close()  # flushes
        d = paths.collection_dir("c")
        assert (d / "data_level0.bin").exists() and (d / "data_level0_384.bin").exists()
        with IndexManager(d, {PRIMARY: PRIMARY_DIM, "384": 384}, config=cfg, start_flusher=False) as m:
            assert m.status == {PRIMARY: "ok", "384": "ok"}
            assert len(m.indexes["384"]) == 12 and len(m.indexes[PRIMARY]) == 12

        # A removed file leaves the pass's index too (the delete is logged by the database).
        rag = RagDB(paths.rag_db("c"), "c")
        rag.remove_path(str(tmp_path / "docs" / "n0.txt"))
        rag.close()
        # The index files are derived: deleted, they are rebuilt from the stored vectors.
        extra = [f for f in d.iterdir() if "_384" in f.name]
        assert {"header_384.bin", "data_level0_384.bin", "link_lists_384.bin"} <= {f.name for f in extra}
        for f in extra:
            f.unlink()
        sync = IndexSync(cfg, paths, PRIMARY_DIM, passes.dims(), stores=open_data_dir(paths))
        with capture_logs() as logs:
            sync.sync("c")
        assert [e.get("space") for e in logs if e["event"] == "index_rebuild"] == ["384"]
        assert len(sync.managers["c"].indexes["384"]) == 11 and (d / "data_level0_384.bin").exists()
        assert len(sync.managers["c"].indexes[PRIMARY]) == 11
        sync.close()


def test_the_pass_index_follows_deletes_and_later_vectors_by_replay(tmp_path):
    with FakeLLMServer(embed_dims={"all-minilm": 384}) as srv:
        cfg = _cfg(srv.url, multi_embed_384="ollama:all-minilm")
        paths = _paths(tmp_path)
        passes = open_passes(cfg, HashEmbedder(PRIMARY_DIM))
        _ingest(cfg, paths, tmp_path / "docs", passes, dict(list(NOTES.items())[:6]))
        sync = IndexSync(cfg, paths, PRIMARY_DIM, passes.dims(), stores=open_data_dir(paths))
        sync.sync("c")
        sync.close()
        _ingest(cfg, paths, tmp_path / "docs", passes, dict(list(NOTES.items())[6:]))
        rag = RagDB(paths.rag_db("c"), "c")
        rag.remove_path(str(tmp_path / "docs" / "n1.txt"))
        rag.close()
        sync = IndexSync(cfg, paths, PRIMARY_DIM, passes.dims(), stores=open_data_dir(paths))
        sync.sync("c")
        m = sync.managers["c"]
        assert m.status["384"] == "ok"  # loaded from its file and replayed, not rebuilt
        assert len(m.indexes["384"]) == 11 and len(m.indexes[PRIMARY]) == 11
        rag = RagDB(paths.rag_db("c"), "c", readonly=True)
        gone = set(range(1, 13)) - set(rag.chunk_ids_of_documents([r[2] for r in rag.document_paths()]))
        assert gone and not any(g in m.indexes["384"] for g in gone)
        rag.close()
        sync.close()


def test_a_missing_model_skips_its_pass_with_a_warning_and_a_status_line(tmp_path):
    with FakeLLMServer(embed_dims={"all-minilm": 384}) as srv:
        cfg = _cfg(srv.url, multi_embed_384="ollama:all-minilm", multi_embed_1024="ollama:mxbai-embed-large")
        paths = _paths(tmp_path)
        with capture_logs() as logs:
            passes = open_passes(cfg, HashEmbedder(PRIMARY_DIM))
        assert [p.space for p in passes.working()] == ["384"]
        (line,) = passes.degraded()
        assert "multi_embed_1024" in line and "mxbai-embed-large" in line and "ollama pull mxbai-embed-large" in line
        warned = [e for e in logs if e["event"] == "embed_pass_skipped"]
        assert warned and warned[0]["log_level"] == "warning" and warned[0]["key"] == "multi_embed_1024"
        skipped = [i for i in passes.info() if i["key"] == "multi_embed_1024"][0]
        assert skipped["state"] == "skipped" and skipped["problem"] == line
        _ingest(cfg, paths, tmp_path / "docs", passes, NOTES)
        chunks, by_space, _, e1024 = _counts(paths)
        assert by_space == {PRIMARY: 12, "384": 12} and e1024 is None


def test_a_server_down_at_start_or_a_model_of_another_dimension_skips_the_pass(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    passes = open_passes(_cfg(dead, multi_embed_1024="ollama:mxbai-embed-large"), HashEmbedder(PRIMARY_DIM))
    (line,) = passes.degraded()
    assert passes.working() == [] and "cannot reach Ollama" in line and "multi_embed_1024" in line
    assert "ollama serve" in line

    with FakeLLMServer(embed_dims={"all-minilm": 384}) as srv:
        passes = open_passes(_cfg(srv.url, multi_embed_1024="ollama:all-minilm"), HashEmbedder(PRIMARY_DIM))
        (line,) = passes.degraded()
        assert passes.working() == [] and "384-d" in line and "needs a 1024-d model" in line
    # a spec that names no embedder is skipped the same way (the daemon still starts)
    passes = open_passes(_cfg(dead, multi_embed_384="word2vec"), HashEmbedder(PRIMARY_DIM))
    assert passes.working() == [] and "names no embedder" in passes.degraded()[0]
    # the primary embedder itself as a pass would add nothing
    passes = open_passes(_cfg(dead, multi_embed_384="hash:384"), HashEmbedder(384))
    assert passes.working() == [] and "is the primary embedder" in passes.degraded()[0]


def test_a_pass_whose_model_goes_away_is_skipped_and_the_primary_carries_on(tmp_path):
    with FakeLLMServer(embed_dims={"all-minilm": 384}) as srv:
        cfg = _cfg(srv.url, multi_embed_384="ollama:all-minilm")
        paths = _paths(tmp_path)
        passes = open_passes(cfg, HashEmbedder(PRIMARY_DIM))
        srv.embed_dims.clear()  # `ollama rm all-minilm` while the daemon runs
        with capture_logs() as logs:
            _ingest(cfg, paths, tmp_path / "docs", passes, NOTES)
        chunks, by_space, _, _ = _counts(paths)
        assert by_space == {PRIMARY: 12}, "the primary vectors must not wait for a broken pass"
        assert passes.working() == []
        (line,) = passes.degraded()
        assert "multi_embed_384" in line and "stopped working" in line and "restart" in line
        assert any(e["event"] == "embed_pass_failed" for e in logs)


def test_a_changed_pass_model_replaces_the_pass_vectors(tmp_path):
    with FakeLLMServer(embed_dims={"all-minilm": 384, "other-minilm": 384}) as srv:
        paths = _paths(tmp_path)
        cfg = _cfg(srv.url, multi_embed_384="ollama:all-minilm")
        _ingest(cfg, paths, tmp_path / "docs", open_passes(cfg, HashEmbedder(PRIMARY_DIM)), NOTES)
        cfg2 = _cfg(srv.url, multi_embed_384="ollama:other-minilm")
        _ingest(cfg2, paths, tmp_path / "docs", open_passes(cfg2, HashEmbedder(PRIMARY_DIM)), {})
        _, by_space, e384, _ = _counts(paths)
        assert by_space == {PRIMARY: 12, "384": 12} and e384[0].startswith("ollama:other-minilm@")
        rag = RagDB(paths.rag_db("c"), "c", readonly=True)
        ids = {r[0] for r in rag.conn.execute("SELECT DISTINCT embedder_id FROM vectors WHERE space='384'")}
        rag.close()
        assert ids == {e384[0]}


def _semantic(model, text):
    """The pass model 'understands' that a feline is a cat; everything else points elsewhere."""
    v = np.zeros(384)
    t = text.lower()
    if "feline" in t or t.strip() == "cat":
        v[0] = 1.0
    else:
        v[1] = 1.0
        v[2 + sum(map(ord, t)) % 300] = 0.3
    return v.tolist()


@pytest.mark.parametrize("live_index", [False, True])
def test_search_uses_every_pass_and_keeps_the_best_similarity(tmp_path, live_index):
    files = {f"cat{i}.txt": f"cat cat{i} catalog of cats number {i}" for i in range(6)}
    files["feline.txt"] = "The feline sat quietly on the mat."
    with FakeLLMServer(embed_dims={"all-minilm": 384}, embed_fn=_semantic) as srv:
        cfg = _cfg(srv.url, multi_embed_384="ollama:all-minilm")
        paths = _paths(tmp_path)
        primary = HashEmbedder(PRIMARY_DIM)
        passes = open_passes(cfg, primary)
        _ingest(cfg, paths, tmp_path / "docs", passes, files)
        sync = None
        if live_index:
            sync = IndexSync(cfg, paths, PRIMARY_DIM, passes.dims(), stores=open_data_dir(paths))
            sync.sync("c")
        f = Filters.make(collections=["c"])

        def dense(vs):
            with Searcher(cfg, paths, primary, collections=["c"], vectors=vs, stores=open_data_dir(paths)) as s:
                return s.search("cat", filters=f, limit=10, mode="dense", top_k=3)

        # Without the pass the feline note is out of reach: the hash embedder sees no shared word.
        alone = dense(VectorSearch(cfg, sync))
        assert not any(h["filename"] == "feline.txt" for h in alone["results"])
        vs = VectorSearch(cfg, sync, passes)
        both = dense(vs)
        names = [h["filename"] for h in both["results"]]
        assert "feline.txt" in names, names
        feline = both["results"][names.index("feline.txt")]
        assert feline["sim"] == pytest.approx(1.0, abs=1e-5)
        # chunks the primary found keep their primary similarity (the pass scores them near 0)
        before = {a["filename"]: a["sim"] for a in alone["results"]}
        assert before and set(before) <= set(names)
        for h in both["results"]:
            if h["filename"] in before:
                assert h["sim"] == pytest.approx(before[h["filename"]], abs=1e-5)
        t = both["retrieval_meta"]["timings_ms"]
        assert "embed_pass_384" in t and "vector_pass_384" in t and "embed" in t and "vector" in t
        assert "embed_pass_384" not in alone["retrieval_meta"]["timings_ms"]
        embeds = [r for r in srv.requests if r["provider"] == "ollama-embed" and r["body"]["input"] == ["cat"]]
        assert len(embeds) == 1  # the query went to the pass model once
        vs.close()
        if sync is not None:
            assert sync.pass_index_for(RagDB(paths.rag_db("c"), "c", readonly=True), "384") is not None
            sync.close()


def test_a_pass_whose_query_embedding_fails_leaves_the_search_to_the_primary(tmp_path):
    with FakeLLMServer(embed_dims={"all-minilm": 384}) as srv:
        cfg = _cfg(srv.url, multi_embed_384="ollama:all-minilm")
        paths = _paths(tmp_path)
        primary = HashEmbedder(PRIMARY_DIM)
        passes = open_passes(cfg, primary)
        _ingest(cfg, paths, tmp_path / "docs", passes, NOTES)
        srv.embed_dims.clear()
        vs = VectorSearch(cfg, None, passes)
        with Searcher(cfg, paths, primary, collections=["c"], vectors=vs, stores=open_data_dir(paths)) as s:
            res = s.search("topic t3", filters=Filters.make(collections=["c"]), limit=5, mode="dense")
        assert res["results"] and res["results"][0]["filename"] == "n3.txt"
        assert "failed_pass_384" in res["retrieval_meta"]["timings_ms"]
        assert passes.working() == [] and "multi_embed_384" in passes.degraded()[0]
        vs.close()


def test_a_long_pass_backfill_lets_new_primary_vectors_go_first(tmp_path):
    import threading
    import time

    from ragweedd.ingest.pipeline import Pipeline as _Pipeline

    def slow(model, text):
        time.sleep(0.05)  # a big model on a laptop
        return HashEmbedder(384).embed_batch([text])[0].tolist()

    with FakeLLMServer(embed_dims={"all-minilm": 384}, embed_fn=slow) as srv:
        cfg = _cfg(srv.url, embed_extra="batch_size = 4", multi_embed_384="ollama:all-minilm")
        paths = _paths(tmp_path)
        docs = tmp_path / "docs"
        docs.mkdir()
        emb = HashEmbedder(PRIMARY_DIM)
        passes = open_passes(cfg, emb)
        pipe = _Pipeline(cfg, paths, emb, defer_vectors=True, stores=open_data_dir(paths))
        changed = threading.Event()
        vec = Vectorizer(cfg, paths, emb, index_embedder_id(emb.id, cfg.chunk_context),
                         collections=lambda: ["c"], on_changes=lambda name: changed.set(), passes=passes,
                         stores=open_data_dir(paths))
        try:
            for i in range(40):
                (docs / f"f{i}.txt").write_text(f"file {i} with words w{i}")
                pipe.ingest_file("c", docs / f"f{i}.txt", docs)
            # started after the files are in, so its first fill sees all 40 chunks pending: started
            # before, it could fill the first few and begin the pass before the rest arrived
            vec.start()
            vec.notify("c")
            rag = RagDB(paths.rag_db("c"), "c", readonly=True)
            deadline = time.monotonic() + 30
            while rag.pass_vector_count("384") < 4 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert rag.pending_summary()[0] == 0 and rag.pass_vector_count("384") < 40
            (docs / "late.txt").write_text("a late file")
            pipe.ingest_file("c", docs / "late.txt", docs)
            vec.notify("c")
            while rag.pending_summary()[0] and time.monotonic() < deadline:
                time.sleep(0.01)
            assert rag.pending_summary()[0] == 0
            assert rag.pass_vector_count("384") < 40, "the late file's primary vector waited for the whole pass"
            assert vec.drain() is None
            assert rag.pass_vector_count("384") == 41 and rag.chunk_count() == 41
            rag.close()
        finally:
            vec.stop()
            pipe.close()


def test_the_pass_log_records_every_pass_write_and_removal_and_never_the_primary(tmp_path):
    paths = _paths(tmp_path)
    cfg = _cfg("http://127.0.0.1:9")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("alpha text")
    pipe = Pipeline(cfg, paths, HashEmbedder(PRIMARY_DIM),
                    stores=open_data_dir(paths))  # primary vectors written with the chunks
    pipe.ingest_file("c", docs / "a.txt", docs)
    pipe.close()
    rag = RagDB(paths.rag_db("c"), "c")
    (cid, emb_id, _, ctx), = rag.pass_missing_batch("384", 10)
    v = np.ones(384, np.float32).tobytes()
    with pytest.raises(ValueError):
        rag.add_pass_vectors(PRIMARY, "x", [(cid, emb_id, ctx, v)])
    assert rag.add_pass_vectors("384", "m@1", [(cid, "other:0", ctx, v)]) == []  # not the chunk that was read
    assert rag.add_pass_vectors("384", "m@1", [(cid, emb_id, ctx, v)]) == [cid]
    assert rag.add_pass_vectors("384", "m@1", [(cid, emb_id, ctx, v)]) == []  # written once
    assert rag.pass_missing_batch("384", 10) == [] and rag.pass_vector_count("384") == 1
    assert rag.pass_changes_after("384", 0) == [(1, "add", cid)] and rag.pass_changes_after("1024", 0) == []
    primary_log = rag.max_seq()
    rag.remove_path(str(docs / "a.txt"))
    assert rag.pass_changes_after("384", 1) == [(2, "delete", cid)] and rag.pass_max_seq("384") == 2
    assert rag.max_seq() == primary_log + 1  # the primary log got its own delete, nothing of the pass
    rag.close()


def test_the_bundled_minilm_as_the_384_pass_beside_an_ollama_primary(tmp_path):
    from ragweedd.embed.factory import make_embedder
    from ragweedd.embed.long import embed_texts

    with FakeLLMServer(embed_dims={"nomic-embed-text": 768}) as srv:
        text = (f"multi_embed_384 = 'local:all-minilm-l6-v2'\n"
                f"[embed]\nmodel = 'ollama:nomic-embed-text'\nollama_url = '{srv.url}'\n")
        cfg = load_config(text=text, env={})
        paths = _paths(tmp_path)
        primary = make_embedder(cfg.embed_model, cfg)
        passes = open_passes(cfg, primary)
        (p,) = passes.working()
        assert p.index_id.startswith("local:all-minilm-l6-v2@") and primary.dim == 768
        docs = tmp_path / "docs"
        docs.mkdir()
        pipe = Pipeline(cfg, paths, primary, defer_vectors=True, stores=open_data_dir(paths))
        vec = Vectorizer(cfg, paths, primary, index_embedder_id(primary.id, cfg.chunk_context),
                         collections=lambda: ["c"], on_changes=lambda name: None, passes=passes,
                         stores=open_data_dir(paths))
        vec.start()
        try:
            for name, body in list(NOTES.items())[:4]:
                (docs / name).write_text(body)
                pipe.ingest_file("c", docs / name, docs)
            vec.notify("c")
            assert vec.drain() is None
        finally:
            vec.stop()
            pipe.close()
        rag = RagDB(paths.rag_db("c"), "c", readonly=True)
        assert rag.embedder(PRIMARY)[1] == 768 and rag.embedder("384") == (p.index_id, 384)
        stored = rag.vectors_for(sorted(rag.chunk_ids_of_documents([r[2] for r in rag.document_paths()])), "384")
        assert len(stored) == 4
        # the stored pass vectors are MiniLM's own
        cid = min(stored)
        text_of = rag.hits([cid])[cid]["text"]
        rag.close()
        from ragweedd.chunk.context import embed_input

        want = embed_texts(p.embedder, [embed_input(text_of, None)])[0]
        got = np.frombuffer(stored[cid], dtype=np.float32)
        assert float(got @ want) > 0.9  # the context line (file title) shifts it a little


def test_a_replaced_chunk_that_reuses_an_id_still_gets_its_pass_vector(tmp_path):
    """The embedding stage starts a pass's fill above the chunks it knows complete; an edited newest
    file's new chunk takes the id of the chunk it replaced, and must not be skipped."""
    with FakeLLMServer(embed_dims={"all-minilm": 384}) as srv:
        cfg = _cfg(srv.url, multi_embed_384="ollama:all-minilm")
        paths = _paths(tmp_path)
        docs = tmp_path / "docs"
        docs.mkdir()
        emb = HashEmbedder(PRIMARY_DIM)
        pipe = Pipeline(cfg, paths, emb, defer_vectors=True, stores=open_data_dir(paths))
        vec = Vectorizer(cfg, paths, emb, index_embedder_id(emb.id, cfg.chunk_context),
                         collections=lambda: ["c"], on_changes=lambda name: None, passes=open_passes(cfg, emb),
                         stores=open_data_dir(paths))
        vec.start()
        rag = None
        try:
            for i in range(3):
                (docs / f"n{i}.txt").write_text(f"note {i}")
                pipe.ingest_file("c", docs / f"n{i}.txt", docs)
                vec.notify("c")
                assert vec.drain() is None
            rag = RagDB(paths.rag_db("c"), "c", readonly=True)
            before = rag.chunk_ids_of(rag.md5_of_path(str(docs / "n2.txt")))
            (docs / "n2.txt").write_text("note two, edited")
            pipe.ingest_file("c", docs / "n2.txt", docs)
            after = rag.chunk_ids_of(rag.md5_of_path(str(docs / "n2.txt")))
            assert after == before, "the replaced chunk's id was not reused: the test proves nothing"
            vec.notify("c")
            assert vec.drain() is None
            assert rag.pass_missing_batch("384", 10) == [] and rag.pass_vector_count("384") == rag.chunk_count() == 3
            (docs / "n3.txt").write_text("note three")
            pipe.ingest_file("c", docs / "n3.txt", docs)
            vec.notify("c")
            assert vec.drain() is None
            assert rag.pass_missing_batch("384", 10) == [] and rag.pass_vector_count("384") == 4
            assert [i["vectors"] for i in vec.passes.info()] == [4]
        finally:
            vec.stop()
            pipe.close()
            if rag is not None:
                rag.close()
