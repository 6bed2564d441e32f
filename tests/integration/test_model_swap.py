"""A change of embed.model without downtime, below the daemon: the store's swap (one transaction,
the index files of the old vectors rebuilt, not replayed), ``model_swap.prepare`` (who serves, when
the switch is due, when it cannot be done) and the embedding stage filling the new vectors from the
stored chunk texts and context lines, on real SQLite and the real pipeline."""

from __future__ import annotations

import numpy as np
import pytest

from ragweedd.chunk.context import embed_input, index_embedder_id
from ragweedd.config import load_config
from ragweedd.embed.hashing import HashEmbedder
from ragweedd.index.manager import IndexManager
from ragweedd.index.sync import IndexSync
from ragweedd.ingest.model_swap import prepare, spec_of
from ragweedd.ingest.pipeline import Pipeline
from ragweedd.ingest.vectorize import Vectorizer
from ragweedd.paths import Paths
from ragweedd.store.backends import open_data_dir
from ragweedd.store.sqlite.rag_db import RagDB
from ragweedd.store.types import MIGRATION, PRIMARY


def _cfg(model: str = "hash:64", extra: str = ""):
    return load_config(text=f"{extra}\n[embed]\nmodel = '{model}'\n", env={})


def _paths(tmp_path):
    return Paths.resolve(str(tmp_path / "d"), str(tmp_path / "s"), str(tmp_path / "c")).ensure()


class Counting:
    """An embedder that records every text it is asked for."""

    def __init__(self, inner):
        self.inner, self.texts = inner, []

    def embed_batch(self, texts):
        self.texts += list(texts)
        return self.inner.embed_batch(texts)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _run(cfg, paths, emb, files: dict[str, str], docs, *, migration=None, collection="c", on_migrated=None):
    """Publish ``files`` (none: only run the embedding stage) and embed until nothing waits."""
    docs.mkdir(exist_ok=True)
    pipe = Pipeline(cfg, paths, emb, defer_vectors=True, stores=open_data_dir(paths))
    vec = Vectorizer(cfg, paths, emb, index_embedder_id(emb.id, cfg.chunk_context), collections=lambda: [collection],
                     on_changes=lambda name: None, migration=migration, on_migrated=on_migrated,
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


def _rag(paths, collection="c", readonly=True):
    return RagDB(paths.rag_db(collection), collection, readonly=readonly)


FILES = {f"n{i}.txt": f"Note {i} on harbours, codeword hb{i}x, and a little more text." for i in range(7)}


def test_spec_of_names_the_model_that_made_an_embedder_id():
    assert spec_of("hash:64@fh1+ctx1") == "hash:64"
    assert spec_of("ollama:nomic-embed-text:v1.5@0123456789ab+ctx1") == "ollama:nomic-embed-text:v1.5"
    assert spec_of("local:all-minilm-l6-v2@q8-1234abcd") == "local:all-minilm-l6-v2"
    assert spec_of("local:all-minilm-l6-v2@f32-1234abcd+ctx1") == "local:all-minilm-l6-v2-f32"
    assert spec_of("local:other-model@q8-1") is None
    assert spec_of("mystery") is None


def test_the_new_vectors_are_built_beside_the_old_and_swapped_in_one_step(tmp_path):
    cfg_a, paths = _cfg("hash:64"), _paths(tmp_path)
    _run(cfg_a, paths, HashEmbedder(64), FILES, tmp_path / "docs")
    # an index file of the old vectors, as the daemon keeps it
    sync = IndexSync(cfg_a, paths, 64, stores=open_data_dir(paths))
    sync.sync("c")
    old_seq = sync.managers["c"].applied_seq[PRIMARY]
    sync.close()

    cfg_b = _cfg("hash:32")
    new = Counting(HashEmbedder(32))
    serving, m = prepare(cfg_b, paths, new, stores=open_data_dir(paths))
    assert m is not None and serving.id == HashEmbedder(64).id, "the old model serves meanwhile"
    assert m.old_id == "hash:64@fh1+ctx1" and m.index_id == "hash:32@fh1+ctx1" and m.dim == 32
    ready: list[bool] = []
    _run(cfg_b, paths, serving, {}, tmp_path / "docs", migration=m, on_migrated=lambda: ready.append(True))
    assert ready == [True] and m.ready
    assert m.info()["pending_chunks"] == 0 and m.info()["vectors"] == 7 and m.info()["state"] == "switching"
    rag = _rag(paths)
    try:
        assert rag.swap_progress() == (7, 7)
        assert rag.embedder(PRIMARY) == ("hash:64@fh1+ctx1", 64), "not switched before the daemon says so"
        # each new vector is the new model's embedding of exactly what the old one read
        rows = rag.pass_missing_batch("primary-none", 100)  # every chunk, in the form the stage reads
        want = {cid: HashEmbedder(32).embed_batch([embed_input(t, ctx)])[0] for cid, _, t, ctx in rows}
        got = rag.vectors_for(sorted(want), MIGRATION)
        for cid, v in want.items():
            np.testing.assert_allclose(np.frombuffer(got[cid], dtype=np.float32), v, rtol=1e-6)
    finally:
        rag.close()
    assert len(new.texts) == 7

    # the next start makes the switch before serving
    serving, m2 = prepare(cfg_b, paths, new, stores=open_data_dir(paths))
    assert serving is new and m2 is None
    rag = _rag(paths)
    try:
        assert rag.embedder(PRIMARY) == ("hash:32@fh1+ctx1", 32) and rag.embedder(MIGRATION) is None
        assert {len(b) for _, blobs in rag.iter_vectors() for b in blobs} == {32 * 4}
        assert rag.swap_progress() == (0, 7)
        assert rag.pass_changes_after(MIGRATION, 0) == []
        assert rag.min_seq() == old_seq + 2 and rag.max_seq() == old_seq + 8
    finally:
        rag.close()
    # the index of the new vectors took the place of the old index, at the log's new end
    m_idx = IndexManager(paths.collection_dir("c"), {PRIMARY: 32}, start_flusher=False)
    try:
        assert m_idx.status[PRIMARY] == "ok" and len(m_idx.indexes[PRIMARY]) == 7
        assert m_idx.applied_seq[PRIMARY] == old_seq + 8
    finally:
        m_idx.close(flush=False)
    assert not list(paths.collection_dir("c").glob("*_next*"))
    sync = IndexSync(cfg_b, paths, 32, stores=open_data_dir(paths))
    sync.sync("c")
    assert len(sync.managers["c"].indexes[PRIMARY]) == 7
    sync.close()


def test_a_swap_to_a_model_of_the_same_dimension_rebuilds_the_index_rather_than_replaying_it(tmp_path, monkeypatch):
    """Same dimension, other model: only the log's gap tells the old index file from a current one."""
    cfg_a, paths = _cfg("hash:64"), _paths(tmp_path)
    _run(cfg_a, paths, HashEmbedder(64), FILES, tmp_path / "docs")
    sync = IndexSync(cfg_a, paths, 64, stores=open_data_dir(paths))
    sync.sync("c")
    sync.close()
    rag = _rag(paths, readonly=False)
    try:
        rag.reset_pass(MIGRATION, "other-64", 64)
        rows = rag.pass_missing_batch(MIGRATION, 100)
        rag.add_pass_vectors(MIGRATION, "other-64", [(cid, eid, ctx, np.full(64, 0.125, np.float32).tobytes())
                                                     for cid, eid, _, ctx in rows])
        assert rag.finish_model_swap()
        max_seq, min_seq = rag.max_seq(), rag.min_seq()
    finally:
        rag.close()
    m_idx = IndexManager(paths.collection_dir("c"), {PRIMARY: 64}, start_flusher=False)
    try:
        assert m_idx.status[PRIMARY] == "ok"
        assert m_idx.plan(PRIMARY, max_seq, min_seq) == "rebuild"
    finally:
        m_idx.close(flush=False)
    # while the daemon rebuilds it, searches never see the old graph: its vectors are another model's
    seen: list[tuple[int, str, bool]] = []
    real = IndexManager.rebuild

    def watching(self, suffix, batches, applied_seq):
        rag = _rag(paths)
        try:
            idx = sync.index_for(rag)
            seen.append((len(self.indexes[suffix]), self.status[suffix], idx is not None and idx.complete(max_seq)))
        finally:
            rag.close()
        return real(self, suffix, batches, applied_seq)

    monkeypatch.setattr(IndexManager, "rebuild", watching)
    sync = IndexSync(cfg_a, paths, 64, stores=open_data_dir(paths))
    try:
        sync.sync("c")
        assert seen == [(0, "stale", True)], "the old graph is emptied before anyone can search it"
        assert len(sync.managers["c"].indexes[PRIMARY]) == 7 and sync.managers["c"].status[PRIMARY] == "ok"
        vecs = sync.managers["c"].indexes[PRIMARY].search_exact(np.full(64, 0.125, np.float32), 1)
        assert float(vecs[1][0]) == pytest.approx(64 * 0.125 * 0.125)
    finally:
        sync.close()


def test_a_swap_is_refused_while_a_chunk_lacks_its_new_vector(tmp_path):
    cfg_a, paths = _cfg("hash:64"), _paths(tmp_path)
    _run(cfg_a, paths, HashEmbedder(64), FILES, tmp_path / "docs")
    rag = _rag(paths, readonly=False)
    try:
        assert not rag.finish_model_swap(), "no move under way"
        rag.reset_pass(MIGRATION, "hash:32@fh1+ctx1", 32)
        rows = rag.pass_missing_batch(MIGRATION, 100)
        rag.add_pass_vectors(MIGRATION, "hash:32@fh1+ctx1",
                             [(cid, eid, ctx, np.zeros(32, np.float32).tobytes()) for cid, eid, _, ctx in rows[:-1]])
        before = (rag.embedder(PRIMARY), rag.max_seq(), rag.swap_progress())
        assert not rag.finish_model_swap()
        assert (rag.embedder(PRIMARY), rag.max_seq(), rag.swap_progress()) == before == (
            ("hash:64@fh1+ctx1", 64), before[1], (6, 7))
    finally:
        rag.close()


def test_an_interrupted_move_resumes_and_a_file_added_meanwhile_gets_both_vectors(tmp_path):
    cfg_a, paths = _cfg("hash:64"), _paths(tmp_path)
    docs = tmp_path / "docs"
    _run(cfg_a, paths, HashEmbedder(64), FILES, docs)
    cfg_b = _cfg("hash:32")
    # a first run that wrote 3 of the new vectors (as a kill -9 after three batches leaves it)
    serving, m = prepare(cfg_b, paths, HashEmbedder(32), stores=open_data_dir(paths))
    assert m is not None
    rag = _rag(paths, readonly=False)
    try:
        rag.reset_pass(MIGRATION, m.index_id, 32)
        rows = rag.pass_missing_batch(MIGRATION, 3)
        rag.add_pass_vectors(MIGRATION, m.index_id, [(cid, eid, ctx, HashEmbedder(32).embed_batch(
            [embed_input(t, ctx)])[0].astype(np.float32).tobytes()) for cid, eid, t, ctx in rows])
    finally:
        rag.close()
    new = Counting(HashEmbedder(32))
    serving, m = prepare(cfg_b, paths, new, stores=open_data_dir(paths))
    assert m is not None and serving.id == HashEmbedder(64).id
    assert (m.info()["vectors"], m.info()["pending_chunks"], m.info()["percent"]) == (3, 4, 42.9)
    _run(cfg_b, paths, serving, {"late.txt": "A late note, codeword lt9x, added during the move."}, docs,
         migration=m)
    assert len(new.texts) == 7 + 1 - 3, "the 3 done chunks are not embedded again"
    rag = _rag(paths)
    try:
        assert rag.swap_progress() == (8, 8)
        assert rag.pass_vector_count(PRIMARY) == 8, "the late file has its old-model vector too"
        changes = rag.pass_changes_after(MIGRATION, 0)
        assert len(changes) == len({c[2] for c in changes}) == 8, "no new vector written twice"
    finally:
        rag.close()


def test_switching_back_to_the_old_model_cancels_the_move(tmp_path):
    cfg_a, paths = _cfg("hash:64"), _paths(tmp_path)
    _run(cfg_a, paths, HashEmbedder(64), FILES, tmp_path / "docs")
    serving, m = prepare(_cfg("hash:32"), paths, HashEmbedder(32), stores=open_data_dir(paths))
    rag = _rag(paths, readonly=False)
    try:
        rag.reset_pass(MIGRATION, m.index_id, 32)
        rows = rag.pass_missing_batch(MIGRATION, 2)
        rag.add_pass_vectors(MIGRATION, m.index_id, [(cid, eid, ctx, np.zeros(32, np.float32).tobytes())
                                                     for cid, eid, _, ctx in rows])
    finally:
        rag.close()
    a = HashEmbedder(64)
    serving, m = prepare(cfg_a, paths, a, stores=open_data_dir(paths))
    assert serving is a and m is None
    rag = _rag(paths)
    try:
        assert rag.embedder(MIGRATION) is None and rag.swap_progress() == (0, 7)
        assert rag.pass_changes_after(MIGRATION, 0) == []
        assert rag.embedder(PRIMARY) == ("hash:64@fh1+ctx1", 64)
    finally:
        rag.close()


@pytest.mark.parametrize("extra, model, why", [
    ("[embed]\nmigrate = false", "hash:32", "embed.migrate is off"),
    ("chunk_context = false", "hash:32", "chunk_context"),
])
def test_a_move_that_cannot_be_done_falls_back_to_indexing_again(tmp_path, extra, model, why):
    from structlog.testing import capture_logs

    cfg_a, paths = _cfg("hash:64"), _paths(tmp_path)
    _run(cfg_a, paths, HashEmbedder(64), FILES, tmp_path / "docs")
    text = f"{extra}\n" if extra.startswith("chunk") else ""
    embed = extra.split("\n", 1)[1] + "\n" if extra.startswith("[embed]") else ""
    cfg = load_config(text=f"{text}[embed]\nmodel = '{model}'\n{embed}", env={})
    b = HashEmbedder(32)
    with capture_logs() as logs:
        serving, m = prepare(cfg, paths, b, stores=open_data_dir(paths))
    assert serving is b and m is None
    refused = [e for e in logs if e["event"] == "model_swap_not_possible"]
    assert refused and why in refused[0]["reason"] and "indexed again" in refused[0]["action"]


def test_collections_of_two_different_old_models_fall_back_to_indexing_again(tmp_path):
    from structlog.testing import capture_logs

    paths = _paths(tmp_path)
    _run(_cfg("hash:64"), paths, HashEmbedder(64), FILES, tmp_path / "a", collection="a")
    _run(_cfg("hash:48"), paths, HashEmbedder(48), FILES, tmp_path / "b", collection="b")
    with capture_logs() as logs:
        serving, m = prepare(_cfg("hash:32"), paths, HashEmbedder(32), stores=open_data_dir(paths))
    assert m is None
    assert "different models" in [e for e in logs if e["event"] == "model_swap_not_possible"][0]["reason"]


def test_a_command_run_without_the_daemon_during_a_move_searches_with_the_old_model(tmp_path):
    """``ragweedd search`` / ``ingest`` while a move is under way (the daemon stopped): the query is
    embedded by the model of the vectors it searches, not by the configured new one."""
    from ragweedd.services import open_oneshot

    dirs = f"data_dir = '{tmp_path / 'd'}'\nstate_dir = '{tmp_path / 's'}'\ncache_dir = '{tmp_path / 'c'}'"
    cfg_a, paths = _cfg("hash:64", dirs), _paths(tmp_path)
    _run(cfg_a, paths, HashEmbedder(64), FILES, tmp_path / "docs")
    cfg_b = _cfg("hash:32", dirs)
    svc = open_oneshot(cfg_b)
    try:
        assert svc.embedder.id == HashEmbedder(32).id, "no move under way: the configured model"
    finally:
        svc.close()
    serving, m = prepare(cfg_b, paths, HashEmbedder(32), stores=open_data_dir(paths))
    assert m is not None
    rag = _rag(paths, readonly=False)
    try:
        rag.reset_pass(MIGRATION, m.index_id, 32)
    finally:
        rag.close()
    svc = open_oneshot(cfg_b)
    try:
        assert svc.embedder.id == HashEmbedder(64).id
        res = svc.search("hb3x", limit=3)
        assert res["results"][0]["filename"] == "n3.txt"
    finally:
        svc.close()


def test_a_collection_folder_the_daemon_no_longer_serves_is_no_part_of_the_move(tmp_path):
    """A collection taken out of the config keeps its folder; it neither blocks the move of the
    served ones nor is moved itself."""
    paths = _paths(tmp_path)
    _run(_cfg("hash:64"), paths, HashEmbedder(64), FILES, tmp_path / "a", collection="a")
    _run(_cfg("hash:48"), paths, HashEmbedder(48), FILES, tmp_path / "b", collection="b")
    serving, m = prepare(_cfg("hash:32"), paths, HashEmbedder(32), ["a"], stores=open_data_dir(paths))
    assert m is not None and m.old_id == "hash:64@fh1+ctx1" and serving.id == HashEmbedder(64).id
    rag = _rag(paths, "b")
    try:
        assert rag.embedder(MIGRATION) is None and rag.embedder(PRIMARY) == ("hash:48@fh1+ctx1", 48)
    finally:
        rag.close()


def test_a_new_model_that_fails_stops_the_move_and_the_old_model_keeps_serving(tmp_path):
    from ragweedd.errors import EmbedderError

    class Down(Counting):
        def embed_batch(self, texts):
            raise EmbedderError("the embedding server is not reachable (test)")

    cfg_a, paths = _cfg("hash:64"), _paths(tmp_path)
    _run(cfg_a, paths, HashEmbedder(64), FILES, tmp_path / "docs")
    serving, m = prepare(_cfg("hash:32"), paths, Down(HashEmbedder(32)), stores=open_data_dir(paths))
    assert m is not None
    ready: list[bool] = []
    vec = _run(_cfg("hash:32"), paths, serving, {"late.txt": "A late note, codeword lt9x."}, tmp_path / "docs",
               migration=m, on_migrated=lambda: ready.append(True))
    assert not ready and not m.ready
    info = m.info()
    assert info["state"] == "failed" and "not reachable" in info["problem"] and "restart ragweedd" in info["problem"]
    assert vec.summary["c"][0] == 0, "the old model's vectors of the new file were written regardless"
    rag = _rag(paths)
    try:
        assert rag.pass_vector_count(PRIMARY) == 8 and rag.embedder(PRIMARY) == ("hash:64@fh1+ctx1", 64)
        assert rag.swap_progress() == (0, 8)
    finally:
        rag.close()
    # the next start goes on (here with a model that works)
    serving, m = prepare(_cfg("hash:32"), paths, HashEmbedder(32), stores=open_data_dir(paths))
    assert m is not None and m.problem is None


def test_a_collection_without_chunks_switches_at_once(tmp_path):
    paths = _paths(tmp_path)
    rag = RagDB(paths.rag_db("e"), "e")
    try:
        rag.set_embedder("hash:64@fh1+ctx1", 64)
    finally:
        rag.close()
    b = HashEmbedder(32)
    serving, m = prepare(_cfg("hash:32"), paths, b, stores=open_data_dir(paths))
    assert serving is b and m is None, "nothing to embed: no move to serve through"
    rag = _rag(paths, "e")
    try:
        assert rag.embedder(PRIMARY) == ("hash:32@fh1+ctx1", 32) and rag.embedder(MIGRATION) is None
    finally:
        rag.close()


def test_a_kill_in_the_middle_of_the_switch_finishes_it_at_the_next_start(tmp_path):
    """Two complete collections; the process died after the first one's transaction (the second
    not switched, the first one's new index not yet written). The next start switches the second
    and serves the new model: no collection is left on the old one."""
    paths = _paths(tmp_path)
    cfg_a, cfg_b = _cfg("hash:64"), _cfg("hash:32")
    for name in ("a", "b"):
        _run(cfg_a, paths, HashEmbedder(64), FILES, tmp_path / name, collection=name)
    serving, m = prepare(cfg_b, paths, HashEmbedder(32), stores=open_data_dir(paths))
    assert m is not None
    for name in ("a", "b"):
        _run(cfg_b, paths, serving, {}, tmp_path / name, collection=name, migration=m)
    (paths.collection_dir("a") / "header_next.bin").write_bytes(b"left by the kill")
    rag = _rag(paths, "a", readonly=False)
    try:
        assert rag.finish_model_swap()
    finally:
        rag.close()
    b = HashEmbedder(32)
    serving, m = prepare(cfg_b, paths, b, stores=open_data_dir(paths))
    assert serving is b and m is None
    for name in ("a", "b"):
        rag = _rag(paths, name)
        try:
            assert rag.embedder(PRIMARY) == ("hash:32@fh1+ctx1", 32) and rag.embedder(MIGRATION) is None
            assert rag.pass_vector_count(PRIMARY) == 7
        finally:
            rag.close()
        assert not list(paths.collection_dir(name).glob("*_next*"))


def test_an_old_model_that_can_no_longer_be_loaded_falls_back_to_indexing_again(tmp_path):
    """The vectors were made by an Ollama model the server no longer has in that version (here: no
    server at all): nothing could embed the queries meanwhile, so the collection is indexed again."""
    from structlog.testing import capture_logs

    cfg_a, paths = _cfg("hash:64"), _paths(tmp_path)
    _run(cfg_a, paths, HashEmbedder(64), FILES, tmp_path / "docs")
    rag = _rag(paths, readonly=False)
    try:
        rag.set_embedder("ollama:gone-model@0123456789ab+ctx1", 64)
    finally:
        rag.close()
    cfg = load_config(text="[embed]\nmodel = 'hash:32'\nollama_url = 'http://127.0.0.1:9'\n", env={})
    b = HashEmbedder(32)
    with capture_logs() as logs:
        serving, m = prepare(cfg, paths, b, stores=open_data_dir(paths))
    assert serving is b and m is None
    refused = [e for e in logs if e["event"] == "model_swap_not_possible"]
    assert refused and "ollama:gone-model@0123456789ab+ctx1" in refused[0]["reason"], refused


def test_blocked_serves_the_old_model_only_when_one_can_serve(tmp_path):
    """A new model that cannot be loaded at a start: the old model serves (nothing recorded) when
    the collections have one that loads with the same weights; else None and the start fails."""
    from ragweedd.errors import EmbedderError
    from ragweedd.ingest.model_swap import blocked

    err = EmbedderError("cannot reach Ollama at http://127.0.0.1:9/api/tags for model x: refused",
                        hint="start it with `ollama serve`, or fix embed.ollama_url")
    paths = _paths(tmp_path)
    assert blocked(_cfg("ollama:x"), open_data_dir(paths), err) is None  # a fresh data directory: nothing can serve
    cfg = _cfg()
    emb = HashEmbedder(64)
    _run(cfg, paths, emb, FILES, tmp_path / "docs")
    slow = load_config(text="[embed]\nmodel = 'ollama:x'\nretry_s = 7\n", env={})
    old, m = blocked(slow, open_data_dir(paths), err) or (None, None)
    assert old is not None and m is not None and old.id == emb.id
    assert (m.blocked, m.index_id, m.dim, m.vectors, m.missing) == (True, "", 0, {"c": 0}, {"c": len(FILES)})
    assert m.info()["state"] == "blocked" and "ollama serve" in m.problem and "every 7 s" in m.problem
    rag = _rag(paths)
    try:
        assert rag.embedder(MIGRATION) is None  # nothing is recorded for a model that never loaded
    finally:
        rag.close()
    # chunk_context changed too: no move is possible, nor the old model's service
    assert blocked(_cfg("ollama:x", "chunk_context = false"), open_data_dir(paths), err) is None
    # the configured model is the old one itself
    assert blocked(_cfg("hash:64"), open_data_dir(paths), err) is None
