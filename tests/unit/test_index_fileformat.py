"""Index files: exact level-0 layout, round trips, and damage of every kind -> CorruptIndexError."""

from __future__ import annotations

import json
import shutil
import struct
import tracemalloc
import zlib

import numpy as np
import pytest
from exact_index import ExactIndex

from ragweedd.errors import CorruptIndexError
from ragweedd.index import fileformat as ff
from ragweedd.index.hnsw import HnswIndex
from ragweedd.store.types import PRIMARY


def unit(n, dim, seed=0):
    x = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def small():
    x = unit(600, 384)
    labels = np.arange(600, dtype=np.int64) * 11 + 2
    idx = HnswIndex(384, seed=2)
    idx.add(labels, x)
    idx.delete(labels[:50])
    idx.set_entry_labels(labels[100:110])
    idx.meta["cluster_stats"] = {"chunks": 600}
    return idx, x, labels


@pytest.fixture
def saved(tmp_path, small):
    idx, _, _ = small
    idx.save(tmp_path, applied_seq=77)
    return tmp_path


def test_record_sizes():
    assert ff.level0_dtype(384).itemsize == 1676
    assert ff.level0_dtype(768).itemsize == 3212
    assert ff.HEADER_SIZE == 160


def test_level0_file_read_with_a_structured_dtype(saved, small):
    _, x, labels = small
    raw = (saved / "data_level0.bin").read_bytes()
    assert len(raw) == 600 * 1676
    dt = np.dtype([("links", "<i4", (32,)), ("count", "<i4"), ("vec", "<f4", (384,)), ("label", "<i8")])
    rec = np.frombuffer(raw, dtype=dt)
    assert rec["label"].tolist() == labels.tolist()
    np.testing.assert_array_equal(rec["vec"], x)
    assert (rec["count"] >= 1).all() and (rec["count"] <= 32).all()
    for r in rec[:50]:
        assert (r["links"][: r["count"]] < 600).all()


def test_suffix_files_and_roundtrip(tmp_path, small):
    idx, x, labels = small
    idx.save(tmp_path, applied_seq=5, suffix="_384")
    names = {p.name for p in tmp_path.iterdir()}
    assert {"data_level0_384.bin", "link_lists_384.bin", "header_384.bin", "index_meta_384.json"} <= names
    back, seq = HnswIndex.load(tmp_path, suffix="_384")
    assert seq == 5
    assert len(back) == len(idx) == 550 and back.tombstones == 50
    assert back.entry_labels.tolist() == labels[100:110].tolist()
    assert back.meta["cluster_stats"] == {"chunks": 600}
    q = x[300]
    a, sa = idx.search(q, 10, 64)
    b, sb = back.search(q, 10, 64)
    assert a.tolist() == b.tolist()
    np.testing.assert_allclose(sa, sb)
    meta = json.loads((tmp_path / "index_meta_384.json").read_text())
    assert meta["dim"] == 384 and meta["count"] == 550 and meta["applied_seq"] == 5
    assert meta["entry_points"] == labels[100:110].tolist()
    # the loaded index keeps growing correctly
    back.add(np.array([10**9]), unit(1, 384, seed=5))
    assert back.search(unit(1, 384, seed=5)[0], 1, 32)[0].tolist() == [10**9]


def test_second_flush_replaces_generation(saved, small):
    idx, _, _ = small
    idx.save(saved, applied_seq=78)
    gens = sorted(p.name for p in saved.iterdir() if ".g" in p.name)
    assert gens == ["data_level0.bin.g2", "index_meta.json.g2", "link_lists.bin.g2"]
    assert (saved / "data_level0.bin").samefile(saved / "data_level0.bin.g2")
    assert HnswIndex.load(saved)[1] == 78


def test_exact_index_reads_any_file_and_hnsw_refuses_flat(tmp_path, saved, small):
    idx, x, _ = small
    ex, seq = ExactIndex.load(saved)
    assert seq == 77 and len(ex) == len(idx)
    ex.save(tmp_path / "flat", 3)
    again, _ = ExactIndex.load(tmp_path / "flat")
    assert again.search(x[400], 3)[0].tolist() == ex.search(x[400], 3)[0].tolist()
    with pytest.raises(CorruptIndexError, match="flat"):
        HnswIndex.load(tmp_path / "flat")


def test_no_header_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        HnswIndex.load(tmp_path)


@pytest.mark.parametrize("name", ["data_level0.bin", "link_lists.bin", "index_meta.json"])
def test_truncated_files(saved, name):
    for p in (saved / name, saved / (name + ".g1")):
        with open(p, "r+b") as f:
            f.truncate(p.stat().st_size - 3)
    with pytest.raises(CorruptIndexError, match="bytes"):
        HnswIndex.load(saved)


@pytest.mark.parametrize("name", ["data_level0.bin", "link_lists.bin", "index_meta.json", "header.bin"])
def test_flipped_byte(saved, name):
    targets = [saved / name] + ([saved / (name + ".g1")] if name != "header.bin" else [])
    for p in targets:  # plain name and generation are one inode; flipping via both paths cancels out
        if p.exists() and not (p != targets[0] and p.samefile(targets[0])):
            raw = bytearray(p.read_bytes())
            raw[len(raw) // 2] ^= 0x40
            p.write_bytes(bytes(raw))
    with pytest.raises(CorruptIndexError):
        HnswIndex.load(saved)


def test_missing_data_file(saved):
    (saved / "link_lists.bin").unlink()
    (saved / "link_lists.bin.g1").unlink()
    with pytest.raises(CorruptIndexError, match="missing"):
        HnswIndex.load(saved)


def test_generation_file_missing_falls_back_to_plain_name(saved, small):
    (saved / "data_level0.bin.g1").unlink()
    idx, seq = HnswIndex.load(saved)
    assert seq == 77 and len(idx) == 550


def _rewrite_header(path, **changes):
    raw = path.read_bytes()
    fields = list(ff.HEADER.unpack(raw[: ff.HEADER.size]))
    names = ["magic", "version", "kind", "dim", "M", "M0", "efc", "n", "live", "tomb", "maxl", "entry", "seq",
             "gen", "rows", "seed", "l0s", "l0c", "lls", "llc", "ms", "mc"]
    for k, v in changes.items():
        fields[names.index(k)] = v
    body = ff.HEADER.pack(*fields)
    path.write_bytes(body + struct.pack("<I", zlib.crc32(body)))


@pytest.mark.parametrize("changes,match", [
    (dict(n=2**30, live=2**30 - 50, l0s=2**30 * 1676), "does not match"),
    (dict(n=2**40, live=2**40 - 50), "inconsistent"),
    (dict(dim=0), "out of range"),
    (dict(version=99), "version"),
    (dict(magic=b"NOTANIDX"), "magic"),
    (dict(rows=10**9), "rows"),
    (dict(entry=10**6), "entry"),
    (dict(l0s=5), "size"),
    (dict(kind=7), "kind"),
])
def test_absurd_headers_fail_before_allocating(saved, changes, match):
    _rewrite_header(saved / "header.bin", **changes)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptIndexError, match=match):
            HnswIndex.load(saved)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 600 * 1676  # never more than a few times the real file, never the claimed size


def test_absurd_count_with_self_consistent_header_checked_against_file_size(saved):
    h = ff.read_header(saved)
    n = 2**30
    _rewrite_header(saved / "header.bin", n=n, live=n - 50, l0s=n * 1676, lls=n * 6 + h["rows"] * 17 * 4)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptIndexError, match="bytes, the header expects"):
            HnswIndex.load(saved)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_header_of_wrong_size(saved):
    with open(saved / "header.bin", "ab") as f:
        f.write(b"\0" * 10)
    with pytest.raises(CorruptIndexError, match="header is 170 bytes"):
        HnswIndex.load(saved)


def _forged(tmp_path, small, mutate):
    idx, _, _ = small
    d = idx.snapshot()
    mutate(d)
    ff.write_index(tmp_path, d, 1)  # checksums are right: only the structural checks can catch it
    with pytest.raises(CorruptIndexError) as e:
        HnswIndex.load(tmp_path)
    return e.value.message


def test_forged_link_out_of_range(tmp_path, small):
    def m(d):
        d.links0[3, 0] = d.n + 7
    assert "neighbour id" in _forged(tmp_path, small, m)


def test_forged_count_out_of_range(tmp_path, small):
    def m(d):
        d.cnt0[3] = 40
    assert "count" in _forged(tmp_path, small, m)


def test_forged_duplicate_live_labels(tmp_path, small):
    def m(d):
        d.labels[d.deleted == 0][:2]  # noqa: B018
        live = np.nonzero(d.deleted == 0)[0]
        d.labels[live[1]] = d.labels[live[0]]
    assert "labels" in _forged(tmp_path, small, m)


def test_forged_nan_vector(tmp_path, small):
    def m(d):
        d.vecs[5, 5] = np.nan
    assert "NaN" in _forged(tmp_path, small, m)


def test_forged_upper_offsets(tmp_path, small):
    def m(d):
        up = np.nonzero(d.levels > 0)[0]
        d.uoff[up[0]] = d.ulinks.shape[0] + 3
    assert "offset" in _forged(tmp_path, small, m)


def test_meta_with_other_applied_seq_is_rejected(saved):
    # A mixture: meta of another flush with a header that checks out
    meta = json.loads((saved / "index_meta.json").read_text())
    meta["applied_seq"] = 1
    raw = json.dumps(meta).encode()
    for p in (saved / "index_meta.json.g1",):
        p.unlink()
        p.write_bytes(raw)
    (saved / "index_meta.json").unlink()
    _rewrite_header(saved / "header.bin", ms=len(raw), mc=zlib.crc32(raw))
    with pytest.raises(CorruptIndexError, match="applied_seq"):
        HnswIndex.load(saved)


def test_older_index_put_back_is_seen_through_applied_seq(tmp_path, small):
    from ragweedd.index.manager import IndexManager

    idx, _, labels = small
    idx.save(tmp_path / "live", applied_seq=10)
    shutil.copytree(tmp_path / "live", tmp_path / "backup")
    idx.save(tmp_path / "live", applied_seq=20)
    for p in (tmp_path / "live").iterdir():
        p.unlink()
    for p in (tmp_path / "backup").iterdir():
        shutil.copy2(p, tmp_path / "live" / p.name)
    _, seq = HnswIndex.load(tmp_path / "live")
    assert seq == 10
    m = IndexManager(tmp_path / "live", {PRIMARY: 384}, start_flusher=False)
    try:
        assert m.applied_seq[PRIMARY] == 10
        assert m.plan(PRIMARY, log_max_seq=20) == "replay"
        assert m.plan(PRIMARY, log_max_seq=20, log_min_seq=15) == "rebuild"  # log no longer reaches back
        assert m.plan(PRIMARY, log_max_seq=8) == "rebuild"  # index ahead of the database
        assert m.plan(PRIMARY, log_max_seq=10) == "ok"
    finally:
        m.close()


def test_bad_suffix_is_refused(tmp_path, small):
    idx, _, _ = small
    with pytest.raises(ValueError, match="suffix"):
        idx.save(tmp_path, 1, suffix="/../x")
