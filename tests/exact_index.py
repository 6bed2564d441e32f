"""Exact (brute-force numpy) index with the HnswIndex API.

It is the reference the HNSW graph is measured against, and what small collections use: below
~20k vectors one matrix-vector product is as fast as a graph walk, and exact. It saves in the same
file format (kind "flat": level-0 records with no links), so tools read both alike.
"""

from __future__ import annotations

import threading

import numpy as np

from ragweedd.index.hnsw import check_query, check_vectors


class ExactIndex:
    kind = "flat"

    def __init__(self, dim: int, capacity: int = 1024, **_ignored) -> None:
        self.dim = int(dim)
        self._lock = threading.Lock()
        cap = max(int(capacity), 16)
        self._vecs = np.zeros((cap, self.dim), np.float32)
        self._labels = np.full(cap, -1, np.int64)
        self._deleted = np.zeros(cap, np.uint8)
        self._n = 0
        self._node_of: dict[int, int] = {}
        self._tomb = 0
        self._entry_labels = np.zeros(0, np.int64)
        self.meta: dict = {}

    def __len__(self) -> int:
        return len(self._node_of)

    def __contains__(self, label) -> bool:
        return int(label) in self._node_of

    @property
    def tombstones(self) -> int:
        return self._tomb

    @property
    def entry_labels(self) -> np.ndarray:
        return self._entry_labels

    def set_entry_labels(self, labels) -> None:
        self._entry_labels = np.asarray(labels, dtype=np.int64).ravel().copy()

    def needs_compaction(self, pct: float = 20.0) -> bool:
        return self._n > 0 and 100.0 * self._tomb / self._n > pct

    def labels(self) -> np.ndarray:
        n = self._n
        return self._labels[:n][self._deleted[:n] == 0].copy()

    def get_vectors(self, labels) -> np.ndarray:
        nodes = [self._node_of[int(x)] for x in np.asarray(labels).ravel()]
        return self._vecs[np.asarray(nodes, dtype=np.int64)].copy()

    def add(self, labels, vectors) -> None:
        lab, vec = check_vectors(labels, vectors, self.dim)
        with self._lock:
            for x in lab.tolist():
                old = self._node_of.pop(x, None)
                if old is not None:
                    self._deleted[old] = 1
                    self._tomb += 1
            need = self._n + lab.size
            if need > self._vecs.shape[0]:
                cap = max(need, 2 * self._vecs.shape[0])
                # New arrays, filled, then swapped: a concurrent search keeps its old consistent view.
                v = np.zeros((cap, self.dim), np.float32)
                lb = np.full(cap, -1, np.int64)
                dl = np.zeros(cap, np.uint8)
                n = self._n
                v[:n], lb[:n], dl[:n] = self._vecs[:n], self._labels[:n], self._deleted[:n]
                self._vecs, self._labels, self._deleted = v, lb, dl
            s = slice(self._n, need)
            self._vecs[s], self._labels[s], self._deleted[s] = vec, lab, 0
            for i, x in enumerate(lab.tolist()):
                self._node_of[x] = self._n + i
            self._n = need

    def delete(self, labels) -> int:
        done = 0
        with self._lock:
            for x in np.asarray(labels, dtype=np.int64).ravel().tolist():
                node = self._node_of.pop(x, None)
                if node is not None:
                    self._deleted[node] = 1
                    done += 1
            self._tomb += done
        return done

    def _view(self):
        with self._lock:
            n = self._n
            return self._vecs[:n], self._labels[:n], self._deleted[:n] != 0

    def search(self, query, k: int = 64, ef: int = 512, entry_points=None):
        q = check_query(query, self.dim, batch=False)
        lab, sc = self.search_batch(q[None, :], k)
        keep = lab[0] >= 0
        return lab[0][keep], sc[0][keep]

    search_exact = search

    def search_batch(self, queries, k: int = 64, ef: int = 512, entry_points=None):
        qs = check_query(queries, self.dim, batch=True)
        k = max(int(k), 1)
        vecs, labels, dead = self._view()
        out_l = np.full((qs.shape[0], k), -1, np.int64)
        out_s = np.full((qs.shape[0], k), -np.inf, np.float32)
        live = int((~dead).sum())
        if live == 0 or qs.shape[0] == 0:
            return out_l, out_s
        kk = min(k, live)
        for s in range(0, qs.shape[0], 256):  # bounded (256 x n) score matrix
            sims = qs[s:s + 256] @ vecs.T
            sims[:, dead] = -np.inf
            top = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
            ts = np.take_along_axis(sims, top, axis=1)
            order = np.argsort(-ts, axis=1, kind="stable")
            top = np.take_along_axis(top, order, axis=1)
            out_l[s:s + 256, :kk] = labels[top]
            out_s[s:s + 256, :kk] = np.take_along_axis(ts, order, axis=1)
        return out_l, out_s

    def compact(self) -> "ExactIndex":
        vecs, labels, dead = self._view()
        new = ExactIndex(self.dim, capacity=int((~dead).sum()))
        new.add(labels[~dead], vecs[~dead])
        new.set_entry_labels(self._entry_labels)
        new.meta = dict(self.meta)
        return new

    def snapshot(self):
        from ragweedd.index.fileformat import IndexData

        with self._lock:
            n = self._n
            return IndexData(
                kind=self.kind, dim=self.dim, M=16, M0=32, ef_construction=0, seed=0, n=n, live=len(self._node_of),
                tombstones=n - len(self._node_of), entry=0 if n else -1, max_level=0 if n else -1,
                vecs=self._vecs[:n].copy(), labels=self._labels[:n].copy(), links0=np.zeros((n, 32), np.int32),
                cnt0=np.zeros(n, np.int32), levels=np.zeros(n, np.int8), deleted=self._deleted[:n].copy(),
                uoff=np.full(n, -1, np.int32), ulinks=np.zeros((0, 16), np.int32), ucnt=np.zeros(0, np.int32),
                entry_labels=self._entry_labels.copy(), meta=dict(self.meta),
            )

    def save(self, directory, applied_seq: int, suffix: str = "") -> None:
        from ragweedd.index.fileformat import write_index

        write_index(directory, self.snapshot(), int(applied_seq), suffix)

    @classmethod
    def from_data(cls, d) -> "ExactIndex":
        """Takes the vectors of any saved index (flat or hnsw) and ignores its graph."""
        idx = cls(d.dim, capacity=d.n)
        live = d.deleted == 0
        idx.add(d.labels[live], d.vecs[live])
        idx.set_entry_labels(d.entry_labels)
        idx.meta = dict(d.meta)
        return idx

    @classmethod
    def load(cls, directory, suffix: str = ""):
        from ragweedd.index.fileformat import read_index

        d, seq = read_index(directory, suffix)
        return cls.from_data(d), seq
