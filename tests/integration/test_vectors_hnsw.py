"""The query path searches the HNSW index (DESIGN §7/§8) through the IndexLookup it is given: the
daemon's live indexes (IndexSync), or the index files on disk caught up from the change log
(DiskIndexes); exact search stays the reference."""

import numpy as np

from ragweedd.config import load_config
from ragweedd.embed.hashing import HashEmbedder
from ragweedd.embed.long import embed_texts
from ragweedd.index.managed import DiskIndexes, ManagedIndex
from ragweedd.index.sync import IndexSync
from ragweedd.ingest.pipeline import Pipeline
from ragweedd.paths import Paths
from ragweedd.query.exact import load_matrix, top_k
from ragweedd.query.vectors import VectorSearch
from ragweedd.store.backends import open_data_dir
from ragweedd.store.sqlite.rag_db import RagDB
from ragweedd.store.types import PRIMARY


def _setup(tmp_path, n_files=120):
    cfg = load_config(text="hnsw_exact_below = 0\nhnsw_ef = 64\n[embed]\nmodel = 'hash:64'\n", env={})
    paths = Paths.resolve(str(tmp_path / "d"), str(tmp_path / "s"), str(tmp_path / "c")).ensure()
    docs = tmp_path / "docs"
    docs.mkdir()
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(400)]
    for i in range(n_files):
        (docs / f"f{i}.txt").write_text(" ".join(rng.choice(words, 40)) + ".")
    pipe = Pipeline(cfg, paths, HashEmbedder(64), stores=open_data_dir(paths))
    for f in sorted(docs.iterdir()):
        pipe.ingest_file("c", f, docs)
    return cfg, paths, pipe, docs


def _exact(rag, q, k):
    ids, mat = load_matrix(rag)
    return top_k(ids, mat, q, k)


class _One:
    """A lookup that serves one given index (as the daemon's does for its collection)."""

    def __init__(self, index):
        self.index = index

    def index_for(self, rag):
        return self.index


def test_daemon_manager_and_disk_files_answer_like_exact_search(tmp_path):
    cfg, paths, pipe, docs = _setup(tmp_path)
    emb = HashEmbedder(64)
    sync = IndexSync(cfg, paths, 64, stores=open_data_dir(paths))
    sync.sync("c")
    rag = RagDB(paths.rag_db("c"), "c", readonly=True)
    queries = embed_texts(emb, ["w1 w2 w3", "w100 w200", "w7 w77 w177 w277"])
    live = VectorSearch(cfg, sync)
    assert sync.index_for(rag) is not None
    for q in queries:
        got = live.search(rag, q, 10)
        want = _exact(rag, q, 10)
        assert len({i for i, _ in got} & {i for i, _ in want}) >= 9
    sync.close()  # flushes the files
    assert sync.index_for(rag) is None
    assert (paths.collection_dir("c") / "data_level0.bin").exists()

    # a file added after the flush: the one-shot path loads the files and replays the log in memory
    new = docs / "new.txt"
    new.write_text("zebraword zebraword zebraword quagga.")
    pipe.ingest_file("c", new, docs)
    q = embed_texts(emb, ["zebraword quagga"])[0]
    disk = DiskIndexes(cfg, paths)
    got = VectorSearch(cfg, disk).search(rag, q, 5)
    assert disk.index_for(rag) is not None, "the files were used, not exact search"
    assert got[0][0] == _exact(rag, q, 1)[0][0]
    assert rag.hits([got[0][0]])[got[0][0]]["source_file"] == str(new)
    files = {p.name: p.stat().st_mtime_ns for p in paths.collection_dir("c").iterdir()}
    disk.close()
    assert {p.name: p.stat().st_mtime_ns for p in paths.collection_dir("c").iterdir()} == files, \
        "a one-shot reader never writes the index files"
    pipe.close()


def test_index_still_being_built_falls_back_to_exact(tmp_path):
    cfg, paths, pipe, docs = _setup(tmp_path, n_files=20)
    from ragweedd.index.manager import IndexManager

    m = IndexManager(paths.collection_dir("c"), {PRIMARY: 64}, config=cfg, start_flusher=False)
    m._pending[PRIMARY] = []  # as during a first build: the live graph is still empty
    try:
        rag = RagDB(paths.rag_db("c"), "c", readonly=True)
        q = embed_texts(HashEmbedder(64), ["w5 w6"])[0]
        assert not ManagedIndex(m).complete(rag.max_seq())
        assert VectorSearch(cfg, _One(ManagedIndex(m))).search(rag, q, 5) == _exact(rag, q, 5)
    finally:
        m.close(flush=False)
        pipe.close()


def test_live_index_lagging_the_log_neither_misses_new_chunks_nor_returns_deleted_ones(tmp_path):
    """The index thread applies committed changes a moment after the ingest transaction; a search in
    that gap (a CI run caught one) must still answer like the database."""
    cfg, paths, pipe, docs = _setup(tmp_path, n_files=40)
    emb = HashEmbedder(64)
    sync = IndexSync(cfg, paths, 64, stores=open_data_dir(paths))
    sync.sync("c")  # the live graph holds the 40 files; nothing applies the changes below
    try:
        rag = RagDB(paths.rag_db("c"), "c", readonly=True)
        live = VectorSearch(cfg, sync)
        m = sync.managers["c"]
        applied = m.applied_seq[PRIMARY]
        new = docs / "new.txt"
        new.write_text("zebraword zebraword zebraword quagga.")
        pipe.ingest_file("c", new, docs)
        q_old = embed_texts(emb, [(docs / "f3.txt").read_text()])[0]
        old_id = _exact(rag, q_old, 1)[0][0]
        pipe.remove_file("c", str(docs / "f3.txt"))
        assert m.applied_seq[PRIMARY] == applied and rag.max_seq() > applied, "the graph must lag for this test"

        q = embed_texts(emb, ["zebraword quagga"])[0]
        got = live.search(rag, q, 5)
        assert got[0][0] == _exact(rag, q, 1)[0][0]
        assert rag.hits([got[0][0]])[got[0][0]]["source_file"] == str(new)
        assert old_id not in {i for i, _ in live.search(rag, q_old, 10)}
        assert len({i for i, _ in got}) == len(got), "a chunk is listed once"
    finally:
        sync.close()
        pipe.close()


def test_a_stop_does_not_wait_for_a_large_files_vectors_to_be_applied(tmp_path):
    """Stopping while the index sync applies a large file's changes: the sync stops between two
    batches and the index is flushed as far as it got; the next start replays the rest."""
    import time

    from ragweedd.index import sync as index_sync
    from ragweedd.index.fileformat import read_header

    cfg, paths, pipe, docs = _setup(tmp_path, n_files=3)
    sync = IndexSync(cfg, paths, 64, stores=open_data_dir(paths))
    sync.sync("c")
    sync.close()
    n = 6 * index_sync.APPLY_BATCH
    rng = np.random.default_rng(5)
    vecs = rng.standard_normal((n, 64)).astype(np.float32)
    rag = RagDB(paths.rag_db("c"), "c")
    rag.publish(md5="b" * 32, source_file=str(docs / "big.txt"), rel_path="big.txt", kind="text", extractor="text",
                ocr_type=None, title=None, size_bytes=1,
                chunks=[{"chunk_idx": i, "text": f"w{i}", "text_hash": str(i), "meta": {}} for i in range(n)],
                vectors={PRIMARY: [v.tobytes() for v in vecs]}, embedders={PRIMARY: ("hash:64", 64)})
    total, top = rag.chunk_count(), rag.max_seq()
    rag.close()

    sync = IndexSync(cfg, paths, 64, stores=open_data_dir(paths))
    sync.start(["c"])
    m = wait_until_applying(sync)
    t0 = time.monotonic()
    sync.close()
    took = time.monotonic() - t0
    flushed = read_header(paths.collection_dir("c"))["applied_seq"]
    assert flushed < top, "the stop waited for every change to be applied"
    assert flushed == m.applied_seq[PRIMARY]  # what the files say they hold is what they hold
    assert took < 10, f"closing the index sync took {took:.1f} s"

    again = IndexSync(cfg, paths, 64, stores=open_data_dir(paths))
    again.sync("c")
    try:
        assert again.count("c") == total
    finally:
        again.close()
        pipe.close()


def wait_until_applying(sync):
    from tests.tools import wait_until

    def applying():
        m = sync.managers.get("c")
        return m if m is not None and len(m.indexes[PRIMARY]) > 3 else None
    return wait_until(applying, 120, 0.01, "the index sync to apply the first batch")


def test_removing_a_collection_while_its_index_is_synced_closes_nothing_in_use(tmp_path):
    """A collection removed while the sync thread applies a large file's changes to its index: the
    sync stops at its next batch before the index is closed (it never applies to a closed index),
    nothing is flushed into the files being removed, and a late change notice finds no database
    instead of opening a new index over them."""
    import shutil

    from ragweedd.index import sync as index_sync

    cfg, paths, pipe, docs = _setup(tmp_path, n_files=3)
    pipe.close()
    n = 6 * index_sync.APPLY_BATCH
    vecs = np.random.default_rng(6).standard_normal((n, 64)).astype(np.float32)
    rag = RagDB(paths.rag_db("c"), "c")
    rag.publish(md5="b" * 32, source_file=str(docs / "big.txt"), rel_path="big.txt", kind="text", extractor="text",
                ocr_type=None, title=None, size_bytes=1,
                chunks=[{"chunk_idx": i, "text": f"w{i}", "text_hash": str(i), "meta": {}} for i in range(n)],
                vectors={PRIMARY: [v.tobytes() for v in vecs]}, embedders={PRIMARY: ("hash:64", 64)})
    rag.close()
    sync = IndexSync(cfg, paths, 64, stores=open_data_dir(paths))
    sync.start(["c"])
    try:
        m = wait_until_applying(sync)
        seen = {}

        def remove_files():
            # what the sync thread is doing when the files go
            seen.update(syncing=sync._syncing, applied=m.applied_seq[PRIMARY])
            shutil.rmtree(paths.collection_dir("c"))

        sync.drop("c", then=remove_files)
        assert seen["syncing"] != "c"
        assert m.applied_seq[PRIMARY] == seen["applied"], "changes were applied to the closed index"
        sync.notify("c")  # a worker's late notice
        assert sync.wait_idle(60)
        assert "c" not in sync.managers and "c" not in sync.errors, sync.errors
        assert not paths.collection_dir("c").exists(), "the closed index was flushed into the removed folder"
    finally:
        sync.close()
