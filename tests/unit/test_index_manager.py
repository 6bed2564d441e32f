"""IndexManager: change replay, debounced flushes, multi-dimension search, corrupt files, rebuilds."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from ragweedd.config import load_config
from ragweedd.errors import InvalidVectorError
from ragweedd.index.fileformat import read_header
from ragweedd.index.hnsw import HnswIndex
from ragweedd.index.manager import IndexManager
from ragweedd.store.types import PRIMARY


def unit(n, dim, seed=0):
    x = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def wait_for(cond, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return False


def test_apply_in_order_and_skip_old_seqs(tmp_path):
    v = unit(10, 8)
    with IndexManager(tmp_path, {PRIMARY: 8}, start_flusher=False) as m:
        assert m.status[PRIMARY] == "new" and m.applied_seq[PRIMARY] == 0
        changes = [(1, "add", 1, v[1]), (2, "add", 2, v[2]), (3, "delete", 1, None), (4, "add", 1, v[5]),
                   (5, "add", 3, v[3]), (6, "delete", 3, None)]
        assert m.apply(PRIMARY, changes) == 6
        idx = m.indexes[PRIMARY]
        assert sorted(idx.labels().tolist()) == [1, 2]
        np.testing.assert_allclose(idx.get_vectors([1])[0], v[5])  # delete then re-add kept the order
        assert m.applied_seq[PRIMARY] == 6
        assert m.apply(PRIMARY, changes) == 0  # replaying an overlapping range is harmless
        with pytest.raises(InvalidVectorError, match="op"):
            m.apply(PRIMARY, [(7, "upsert", 4, v[4])])
    # close() flushed
    idx, seq = HnswIndex.load(tmp_path)
    assert seq == 6 and sorted(idx.labels().tolist()) == [1, 2]


def test_flush_after_quiet_period(tmp_path):
    v = unit(5, 8)
    m = IndexManager(tmp_path, {PRIMARY: 8}, flush_quiet_s=1.0, flush_max_s=30)
    try:
        m.apply(PRIMARY, [(1, "add", 1, v[0])])
        time.sleep(0.1)
        assert not (tmp_path / "header.bin").exists()  # not before the quiet period
        assert wait_for(lambda: (tmp_path / "header.bin").exists(), 5)
        assert read_header(tmp_path)["applied_seq"] == 1
        assert not m.dirty
    finally:
        m.close()


def test_flush_at_most_every_max_while_changes_keep_coming(tmp_path):
    v = unit(200, 8)
    m = IndexManager(tmp_path, {PRIMARY: 8}, flush_quiet_s=0.5, flush_max_s=0.6)
    try:
        start = time.monotonic()
        seq = 0
        while time.monotonic() - start < 1.6:  # a change every 50 ms: never quiet
            seq += 1
            m.apply(PRIMARY, [(seq, "add", seq, v[seq % 200])])
            time.sleep(0.05)
        assert (tmp_path / "header.bin").exists()
        h = read_header(tmp_path)
        assert h["generation"] >= 2 and 0 < h["applied_seq"] <= seq
    finally:
        m.close()
    assert read_header(tmp_path)["applied_seq"] == seq  # close() wrote the rest


def test_config_keys_drive_the_timers(tmp_path):
    cfg = load_config(text="index_flush_quiet_s = 0.25\nindex_flush_max_s = 9.0\nhnsw_exact_below = 7\n", env={})
    m = IndexManager(tmp_path, {PRIMARY: 8}, config=cfg, start_flusher=False)
    assert (m.flush_quiet_s, m.flush_max_s, m.exact_below) == (0.25, 9.0, 7)
    m.close()


def test_multi_dimension_search_keeps_best_score_per_label(tmp_path):
    a, b = unit(300, 16, seed=1), unit(300, 32, seed=2)
    with IndexManager(tmp_path, {PRIMARY: 16, "32": 32}, exact_below=0, start_flusher=False) as m:
        m.add(PRIMARY, np.arange(300), a, seq=1)
        m.add("32", np.arange(300), b, seq=1)
        qa, qb = a[10], b[20]
        labels, scores = m.search({PRIMARY: qa, "32": qb}, k=5, ef=64)
        assert labels.size == len(set(labels.tolist())) == 5
        assert {10, 20} <= set(labels[:2].tolist())
        np.testing.assert_allclose(scores[:2], [1.0, 1.0], atol=1e-5)
        for lab, sc in zip(labels.tolist(), scores.tolist()):
            assert np.isclose(sc, max(a[lab] @ qa, b[lab] @ qb), atol=1e-5)
        with pytest.raises(InvalidVectorError, match="no index"):
            m.search({"_1024": np.zeros(1024, np.float32)})


def test_exact_below_threshold_agrees_with_graph(tmp_path):
    x = unit(500, 16, seed=3)
    with IndexManager(tmp_path, {PRIMARY: 16}, exact_below=10**6, start_flusher=False) as m:
        m.add(PRIMARY, np.arange(500), x, seq=1)
        exact = m.search({PRIMARY: x[7]}, k=10)
        m.exact_below = 0
        graph = m.search({PRIMARY: x[7]}, k=10, ef=128)
        assert exact[0].tolist() == graph[0].tolist()


def test_corrupt_file_is_reported_then_rebuilt(tmp_path):
    x = unit(400, 16, seed=4)
    with IndexManager(tmp_path, {PRIMARY: 16}, start_flusher=False) as m:
        m.add(PRIMARY, np.arange(400), x, seq=9)
    raw = bytearray((tmp_path / "link_lists.bin").read_bytes())
    raw[10] ^= 0xFF
    for p in tmp_path.glob("link_lists.bin*"):
        p.unlink()
    (tmp_path / "link_lists.bin").write_bytes(bytes(raw))
    with IndexManager(tmp_path, {PRIMARY: 16}, start_flusher=False) as m:
        assert m.status[PRIMARY] == "corrupt" and m.plan(PRIMARY, log_max_seq=9) == "rebuild"
        assert len(m.indexes[PRIMARY]) == 0
        m.rebuild(PRIMARY, ((np.arange(s, s + 100), x[s:s + 100]) for s in range(0, 400, 100)), applied_seq=9)
        assert m.status[PRIMARY] == "ok" and len(m.indexes[PRIMARY]) == 400
    idx, seq = HnswIndex.load(tmp_path)
    assert seq == 9 and len(idx) == 400


def test_dimension_change_needs_rebuild(tmp_path):
    with IndexManager(tmp_path, {PRIMARY: 16}, start_flusher=False) as m:
        m.add(PRIMARY, np.arange(5), unit(5, 16), seq=1)
    with IndexManager(tmp_path, {PRIMARY: 24}, start_flusher=False) as m:
        assert m.status[PRIMARY] == "dim_mismatch" and m.plan(PRIMARY, 1) == "rebuild"
        assert m.indexes[PRIMARY].dim == 24


def test_changes_during_a_rebuild_are_not_lost(tmp_path):
    x = unit(1200, 16, seed=5)
    with IndexManager(tmp_path, {PRIMARY: 16}, start_flusher=False) as m:
        started, applied = threading.Event(), threading.Event()

        def batches():
            for s in range(0, 1000, 100):
                yield np.arange(s, s + 100), x[s:s + 100]
                started.set()
                assert applied.wait(10)  # the change below lands while the new graph is half built

        t = threading.Thread(target=m.rebuild, args=(PRIMARY, batches(), 10))
        t.start()
        assert started.wait(5)
        m.apply(PRIMARY, [(11, "add", 1100, x[1100]), (12, "delete", 5, None)])
        assert 5 not in m.indexes[PRIMARY]  # the old graph served the change meanwhile... (it was empty)
        applied.set()
        t.join()
        labels = set(m.indexes[PRIMARY].labels().tolist())
        assert 1100 in labels and 5 not in labels and len(labels) == 1000
        assert m.applied_seq[PRIMARY] == 12


def test_compaction_swaps_in_a_clean_graph(tmp_path):
    x = unit(600, 16, seed=6)
    with IndexManager(tmp_path, {PRIMARY: 16}, compact_pct=20, start_flusher=False) as m:
        m.add(PRIMARY, np.arange(600), x, seq=1)
        m.delete(PRIMARY, np.arange(200), seq=2)
        assert m.maybe_compact() == [PRIMARY]
        idx = m.indexes[PRIMARY]
        assert idx.tombstones == 0 and len(idx) == 400
        assert m.maybe_compact() == []
    assert read_header(tmp_path)["tombstones"] == 0


def test_entry_points_shared_and_persisted(tmp_path):
    with IndexManager(tmp_path, {PRIMARY: 8, "16": 16}, start_flusher=False) as m:
        m.add(PRIMARY, np.arange(50), unit(50, 8), seq=1)
        m.add("16", np.arange(50), unit(50, 16), seq=1)
        m.set_entry_points([3, 4, 5], {"chunks": 50})
    for suffix in ("", "_16"):
        idx, _ = HnswIndex.load(tmp_path, suffix)
        assert idx.entry_labels.tolist() == [3, 4, 5] and idx.meta["cluster_stats"] == {"chunks": 50}
