"""HNSW vector index in numpy + numba (DESIGN §7): insert, search, tombstones, compaction.

Concurrency: one writer at a time (``_wlock``), any number of lock-free readers. Writers insert in
small batches and publish a new immutable ``_Graph`` view (arrays + node count + entry point) after
each batch; a search works on the view it read at its start, so it never waits for a bulk insert and
never sees a node whose vector is not written yet. Arrays are preallocated and grown by copying, so
a reader holding an old view keeps a valid (slightly stale) graph.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ragweedd.errors import InvalidVectorError

if TYPE_CHECKING:
    from pathlib import Path

    import numpy.typing as npt

    from ragweedd.index.fileformat import IndexData

LEVEL_CAP = 16
INSERT_BATCH = 128


@dataclass(frozen=True)
class _Graph:
    vecs: np.ndarray
    labels: np.ndarray
    links0: np.ndarray
    cnt0: np.ndarray
    levels: np.ndarray
    uoff: np.ndarray
    deleted: np.ndarray
    ulinks: np.ndarray
    ucnt: np.ndarray
    n: int
    urows: int
    entry: int
    max_level: int


def _empty_graph(dim: int, M: int, M0: int, cap: int, rows: int) -> _Graph:
    return _Graph(
        vecs=np.zeros((cap, dim), np.float32), labels=np.full(cap, -1, np.int64),
        links0=np.zeros((cap, M0), np.int32), cnt0=np.zeros(cap, np.int32),
        levels=np.zeros(cap, np.int8), uoff=np.full(cap, -1, np.int32), deleted=np.zeros(cap, np.uint8),
        ulinks=np.zeros((rows, M), np.int32), ucnt=np.zeros(rows, np.int32),
        n=0, urows=0, entry=-1, max_level=-1,
    )


def check_vectors(labels: npt.ArrayLike, vectors: npt.ArrayLike, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Validate and normalise an (labels, vectors) pair; a label given twice keeps its last vector."""
    lab = np.asarray(labels)
    vec = np.asarray(vectors)
    if vec.ndim == 1 and lab.ndim == 0:
        lab, vec = lab.reshape(1), vec.reshape(1, -1)
    if lab.ndim != 1 or not (np.issubdtype(lab.dtype, np.integer) or lab.size == 0):
        raise InvalidVectorError(f"labels must be a 1-d array of integers, got shape {lab.shape} dtype {lab.dtype}")
    if vec.ndim != 2 or vec.shape[0] != lab.shape[0] or (vec.shape[0] and vec.shape[1] != dim):
        raise InvalidVectorError(
            f"vectors must have shape ({lab.shape[0]}, {dim}) to match the labels and the index dimension, "
            f"got {vec.shape}",
            hint="was the index created for another embedder?",
        )
    vec = np.ascontiguousarray(vec, dtype=np.float32)
    if vec.size and not np.isfinite(vec).all():
        bad = int(np.nonzero(~np.isfinite(vec).all(axis=1))[0][0])
        raise InvalidVectorError(f"vector for label {int(lab[bad])} contains NaN or infinity")
    lab = lab.astype(np.int64, copy=False)
    if lab.size and lab.min() < 0:
        raise InvalidVectorError(f"labels must be >= 0 (-1 pads results), got {int(lab.min())}")
    uniq, first_from_end = np.unique(lab[::-1], return_index=True)
    if uniq.size != lab.size:
        keep = np.sort(lab.size - 1 - first_from_end)
        lab, vec = lab[keep], vec[keep]
    return lab, vec


def check_query(query: npt.ArrayLike, dim: int, batch: bool) -> np.ndarray:
    q = np.asarray(query, dtype=np.float32)
    want = 2 if batch else 1
    if q.ndim != want or q.shape[-1] != dim:
        raise InvalidVectorError(f"query must have shape {'(n, ' if batch else '('}{dim}), got {q.shape}")
    if not np.isfinite(q).all():
        raise InvalidVectorError("query vector contains NaN or infinity")
    return np.ascontiguousarray(q)


class HnswIndex:
    kind = "hnsw"

    def __init__(self, dim: int, M: int = 16, ef_construction: int = 200, seed: int = 1234,
                 capacity: int = 1024, M0: int | None = None) -> None:
        if not 1 <= dim <= 65536:
            raise InvalidVectorError(f"index dimension must be 1..65536, got {dim}")
        if not 2 <= M <= 512:
            raise InvalidVectorError(f"M must be 2..512, got {M}")
        self.dim, self.M, self.M0 = int(dim), int(M), int(M0 or 2 * M)
        self.ef_construction = max(int(ef_construction), 1)
        self.seed = int(seed)
        self._mult = 1.0 / math.log(self.M)
        self._rng = np.random.default_rng(self.seed)
        self._wlock = threading.Lock()
        self._g = _empty_graph(self.dim, self.M, self.M0, max(capacity, 16), max(capacity // 8, 16))
        self._node_of: dict[int, int] = {}
        self._live = 0
        self._tomb = 0
        self._local = threading.local()
        self._entry_labels = np.zeros(0, np.int64)
        self._entry_nodes: np.ndarray | None = None
        self.meta: dict = {}

    # --- introspection ------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._live

    @property
    def tombstones(self) -> int:
        return self._tomb

    def needs_compaction(self, pct: float = 20.0) -> bool:
        n = self._g.n
        return n > 0 and 100.0 * self._tomb / n > pct

    def __contains__(self, label: int) -> bool:
        return int(label) in self._node_of

    def labels(self) -> np.ndarray:
        """Live labels, in insertion order."""
        g = self._g
        live = g.deleted[: g.n] == 0
        return g.labels[: g.n][live].copy()

    def get_vectors(self, labels: Sequence[int] | np.ndarray) -> np.ndarray:
        g = self._g
        nodes = [self._node_of.get(int(x), -1) for x in np.asarray(labels).ravel()]
        if any(x < 0 for x in nodes):
            missing = [int(lab) for lab, x in zip(labels, nodes) if x < 0][:5]
            raise InvalidVectorError(f"label(s) not in the index: {missing}")
        return g.vecs[np.asarray(nodes, dtype=np.int64)].copy()

    # --- entry points from cluster analysis -----------------------------------------------------
    @property
    def entry_labels(self) -> np.ndarray:
        return self._entry_labels

    def set_entry_labels(self, labels: npt.ArrayLike) -> None:
        self._entry_labels = np.asarray(labels, dtype=np.int64).ravel().copy()
        self._entry_nodes = None

    def _seed_nodes(self, entry_points: npt.ArrayLike | None) -> np.ndarray:
        if entry_points is None:
            cached = self._entry_nodes
            if cached is not None:
                return cached
            labels = self._entry_labels
        else:
            labels = np.asarray(entry_points, dtype=np.int64).ravel()
        node_of = self._node_of
        nodes = np.fromiter((node_of.get(int(x), -1) for x in labels), dtype=np.int32, count=labels.size)
        nodes = nodes[nodes >= 0]
        if entry_points is None:
            self._entry_nodes = nodes
        return nodes

    # --- writes -------------------------------------------------------------------------------
    def add(self, labels: npt.ArrayLike, vectors: npt.ArrayLike) -> None:
        lab, vec = check_vectors(labels, vectors, self.dim)
        for s in range(0, lab.size, INSERT_BATCH):
            with self._wlock:
                self._add_batch(lab[s:s + INSERT_BATCH], vec[s:s + INSERT_BATCH])

    def delete(self, labels: npt.ArrayLike) -> int:
        """Tombstone labels; unknown labels are ignored. Returns how many were deleted."""
        done = 0
        with self._wlock:
            g = self._g
            for x in np.asarray(labels, dtype=np.int64).ravel():
                node = self._node_of.pop(int(x), None)
                if node is not None:
                    g.deleted[node] = 1
                    done += 1
            self._live -= done
            self._tomb += done
            self._entry_nodes = None
        return done

    def _draw_levels(self, b: int) -> np.ndarray:
        u = self._rng.random(b)
        lv = np.floor(-np.log(np.maximum(u, 1e-300)) * self._mult)
        return np.minimum(lv, LEVEL_CAP).astype(np.int8)

    def _grow(self, g: _Graph, need_nodes: int, need_rows: int) -> _Graph:
        cap, rows = g.vecs.shape[0], g.ulinks.shape[0]
        if need_nodes <= cap and need_rows <= rows:
            return g
        ncap = cap if need_nodes <= cap else max(need_nodes, cap * 2)
        nrows = rows if need_rows <= rows else max(need_rows, rows * 2)
        big = _empty_graph(self.dim, self.M, self.M0, ncap, nrows)
        n, r = g.n, g.urows
        for name in ("vecs", "labels", "links0", "cnt0", "levels", "uoff", "deleted"):
            getattr(big, name)[:n] = getattr(g, name)[:n]
        big.ulinks[:r] = g.ulinks[:r]
        big.ucnt[:r] = g.ucnt[:r]
        return _Graph(**{**big.__dict__, "n": n, "urows": r, "entry": g.entry, "max_level": g.max_level})

    def _add_batch(self, lab: np.ndarray, vec: np.ndarray) -> None:
        from ragweedd.index import _kernels as K

        g = self._g
        replaced = [self._node_of.pop(int(x)) for x in lab if int(x) in self._node_of]
        if replaced:
            g.deleted[np.asarray(replaced, dtype=np.int64)] = 1
            self._live -= len(replaced)
            self._tomb += len(replaced)
            self._entry_nodes = None
        b = lab.size
        levels = self._draw_levels(b)
        upper = levels.astype(np.int64)
        offs = np.full(b, -1, np.int32)
        has = upper > 0
        offs[has] = g.urows + np.concatenate(([0], np.cumsum(upper[has])[:-1])).astype(np.int32)
        new_rows = int(upper.sum())
        g = self._grow(g, g.n + b, g.urows + new_rows)
        if g is not self._g:
            self._g = g  # same n: publishing the grown arrays early lets readers drop the old ones
        n0 = g.n
        sl = slice(n0, n0 + b)
        g.vecs[sl] = vec
        g.labels[sl] = lab
        g.levels[sl] = levels
        g.uoff[sl] = offs
        g.deleted[sl] = 0
        g.cnt0[sl] = 0
        g.ucnt[g.urows:g.urows + new_rows] = 0
        efc = self.ef_construction
        top = int(min(int(levels.max()), g.max_level)) if n0 > 0 else -1
        covered = np.minimum(levels.astype(np.int64), g.max_level if n0 > 0 else -1)
        L = max(top, 0) + 1
        cand_ids = np.zeros((b, L, efc), np.int32)
        cand_sims = np.zeros((b, L, efc), np.float32)
        cand_cnt = np.zeros((b, L), np.int64)
        if n0 > 0:
            sc = self._build_scratch(g.vecs.shape[0])
            K.batch_candidates(g.vecs, g.levels, g.links0, g.cnt0, g.uoff, g.ulinks, g.ucnt, g.deleted,
                               n0, b, g.entry, g.max_level, efc, sc["visited"], sc["gens"], sc["cand_k"],
                               sc["cand_v"], sc["res_k"], sc["res_v"], cand_ids, cand_sims, cand_cnt)
        state = np.array([g.entry, g.max_level], np.int64)
        K.link_batch(g.vecs, g.levels, g.links0, g.cnt0, g.uoff, g.ulinks, g.ucnt, n0, b, covered,
                     cand_ids, cand_sims, cand_cnt, self.M, self.M0, efc, state)
        for i, x in enumerate(lab.tolist()):
            self._node_of[x] = n0 + i
        self._live += b
        self._g = _Graph(**{**g.__dict__, "n": n0 + b, "urows": g.urows + new_rows,
                            "entry": int(state[0]), "max_level": int(state[1])})
        if self._entry_labels.size:
            self._entry_nodes = None

    def _build_scratch(self, cap: int) -> dict:
        """Phase-1 scratch, kept between batches (only the writer uses it)."""
        from ragweedd.index import _kernels as K

        sc = getattr(self, "_bscratch", None)
        t = K.num_threads()
        if (sc is None or sc["visited"].shape[1] < cap or sc["visited"].shape[0] != t
                or sc["res_k"].shape[1] < self.ef_construction):
            efc = self.ef_construction
            sc = {"visited": np.zeros((t, cap), np.uint32), "gens": np.zeros(t, np.uint32),
                  "cand_k": np.zeros((t, cap + 1), np.float32), "cand_v": np.zeros((t, cap + 1), np.int32),
                  "res_k": np.zeros((t, efc + 1), np.float32), "res_v": np.zeros((t, efc + 1), np.int32)}
            self._bscratch = sc
        return sc

    # --- reads --------------------------------------------------------------------------------
    def _scratch(self, cap: int, ef: int, k: int) -> dict[str, Any]:
        loc = self._local
        sc = getattr(loc, "sc", None)
        if sc is None or sc["visited"].shape[0] < cap or sc["res_k"].shape[0] < ef + 1 or sc["buf"].shape[0] < k:
            sc = {"visited": np.zeros(cap, np.uint32), "gen": 0,
                  "cand_k": np.zeros(cap + 1, np.float32), "cand_v": np.zeros(cap + 1, np.int32),
                  "res_k": np.zeros(ef + 1, np.float32), "res_v": np.zeros(ef + 1, np.int32),
                  "buf": np.zeros(max(k, 1), np.int32)}
            loc.sc = sc
        sc["gen"] += 1
        if sc["gen"] >= 0xFFFFFFF0:
            sc["visited"][:] = 0
            sc["gen"] = 1
        return sc

    def search(self, query: npt.ArrayLike, k: int = 64, ef: int = 512,
               entry_points: npt.ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Best-first (labels, dot-product scores) of at most k live vectors.

        entry_points: labels that seed layer 0 besides the greedy descent; None = the index's cluster
        entry points (``set_entry_labels``); an empty array = descent only."""
        from ragweedd.index import _kernels as K

        q = check_query(query, self.dim, batch=False)
        k, ef = max(int(k), 1), max(int(ef), 1)
        g = self._g
        seeds = self._seed_nodes(entry_points)
        e = max(ef, k)
        sc = self._scratch(g.vecs.shape[0], e, k)
        out_l = np.full(k, -1, np.int64)
        out_s = np.full(k, -np.inf, np.float32)
        got = K.search_one(q, k, ef, g.vecs, g.labels, g.links0, g.cnt0, g.uoff, g.ulinks, g.ucnt, g.deleted,
                           g.n, g.entry, g.max_level, seeds, sc["visited"], np.uint32(sc["gen"]),
                           sc["cand_k"], sc["cand_v"], sc["res_k"], sc["res_v"], sc["buf"], out_l, out_s)
        return out_l[:got], out_s[:got]

    def search_batch(self, queries: npt.ArrayLike, k: int = 64, ef: int = 512,
                     entry_points: npt.ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(labels (n, k), scores (n, k)); rows with fewer hits are padded with -1 / -inf."""
        from ragweedd.index import _kernels as K

        qs = check_query(queries, self.dim, batch=True)
        k, ef = max(int(k), 1), max(int(ef), 1)
        g = self._g
        seeds = self._seed_nodes(entry_points)
        e = max(ef, k)
        nq = qs.shape[0]
        out_l = np.full((nq, k), -1, np.int64)
        out_s = np.full((nq, k), -np.inf, np.float32)
        if nq == 0:
            return out_l, out_s
        t = max(1, min(K.num_threads(), nq))
        cap = g.vecs.shape[0]
        K.search_many(qs, k, ef, g.vecs, g.labels, g.links0, g.cnt0, g.uoff, g.ulinks, g.ucnt, g.deleted,
                      g.n, g.entry, g.max_level, seeds, np.zeros((t, cap), np.uint32), np.zeros(t, np.uint32),
                      np.zeros((t, cap + 1), np.float32), np.zeros((t, cap + 1), np.int32),
                      np.zeros((t, e + 1), np.float32), np.zeros((t, e + 1), np.int32),
                      np.zeros((t, k), np.int32), out_l, out_s)
        return out_l, out_s

    def search_exact(self, query: npt.ArrayLike, k: int = 64) -> tuple[np.ndarray, np.ndarray]:
        """Brute force over the live vectors: as fast as the graph below ~20k vectors, and exact."""
        q = check_query(query, self.dim, batch=False)
        g = self._g
        sims = g.vecs[: g.n] @ q
        sims[g.deleted[: g.n] != 0] = -np.inf
        k = min(max(int(k), 1), self._live)
        if k <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        top = np.argpartition(-sims, k - 1)[:k]
        top = top[np.argsort(-sims[top], kind="stable")]
        return g.labels[top].copy(), sims[top].astype(np.float32)

    # --- maintenance --------------------------------------------------------------------------
    def compact(self) -> "HnswIndex":
        """A new index holding only the live vectors (tombstones dropped, graph rebuilt)."""
        with self._wlock:
            g = self._g
            live = np.nonzero(g.deleted[: g.n] == 0)[0]
            lab, vec = g.labels[live].copy(), g.vecs[live].copy()
        new = HnswIndex(self.dim, M=self.M, ef_construction=self.ef_construction, seed=self.seed,
                        capacity=max(lab.size, 16), M0=self.M0)
        new.add(lab, vec)
        new.set_entry_labels(self._entry_labels)
        new.meta = dict(self.meta)
        return new

    def snapshot(self) -> IndexData:
        """A consistent copy of the graph for saving (taken under the writer lock, written outside it)."""
        from ragweedd.index.fileformat import IndexData

        with self._wlock:
            g = self._g
            n, r = g.n, g.urows
            return IndexData(
                kind=self.kind, dim=self.dim, M=self.M, M0=self.M0, ef_construction=self.ef_construction,
                seed=self.seed, n=n, live=self._live, tombstones=self._tomb, entry=g.entry,
                max_level=g.max_level, vecs=g.vecs[:n].copy(), labels=g.labels[:n].copy(),
                links0=g.links0[:n].copy(), cnt0=g.cnt0[:n].copy(), levels=g.levels[:n].copy(),
                deleted=g.deleted[:n].copy(), uoff=g.uoff[:n].copy(), ulinks=g.ulinks[:r].copy(),
                ucnt=g.ucnt[:r].copy(), entry_labels=self._entry_labels.copy(), meta=dict(self.meta),
            )

    def save(self, directory: str | Path, applied_seq: int, suffix: str = "") -> None:
        from ragweedd.index.fileformat import write_index

        write_index(directory, self.snapshot(), int(applied_seq), suffix)

    @classmethod
    def from_data(cls, d: IndexData) -> "HnswIndex":
        idx = cls(d.dim, M=d.M, ef_construction=d.ef_construction, seed=d.seed, capacity=16, M0=d.M0)

        def own(a: np.ndarray, dtype: npt.DTypeLike) -> np.ndarray:
            # read_index hands over fresh arrays: adopt them (capacity = n, grown on the next add)
            # instead of copying a second time, which would double the load's peak memory.
            a = np.asarray(a, dtype=dtype)
            return a if a.flags.writeable and a.flags.c_contiguous and a.size else a.copy()

        n = d.n
        idx._g = _Graph(
            vecs=own(d.vecs, np.float32).reshape(n, d.dim), labels=own(d.labels, np.int64),
            links0=own(d.links0, np.int32).reshape(n, d.M0), cnt0=own(d.cnt0, np.int32),
            levels=own(d.levels, np.int8), uoff=own(d.uoff, np.int32), deleted=own(d.deleted, np.uint8),
            ulinks=own(d.ulinks, np.int32).reshape(-1, d.M), ucnt=own(d.ucnt, np.int32),
            n=n, urows=d.ulinks.shape[0], entry=d.entry, max_level=d.max_level,
        )
        live = np.nonzero(d.deleted == 0)[0]
        idx._node_of = dict(zip(d.labels[live].tolist(), live.tolist()))
        idx._live = int(live.size)
        idx._tomb = n - idx._live
        # Continue the level draws where a fresh stream would not repeat the saved nodes' draws.
        idx._rng = np.random.default_rng([idx.seed, n])
        idx.set_entry_labels(d.entry_labels)
        idx.meta = dict(d.meta)
        return idx

    @classmethod
    def load(cls, directory: str | Path, suffix: str = "") -> tuple["HnswIndex", int]:
        """Load and validate; raises CorruptIndexError on any damage. Returns (index, applied_seq)."""
        from ragweedd.errors import CorruptIndexError
        from ragweedd.index.fileformat import read_index

        d, seq = read_index(directory, suffix)
        if d.kind != cls.kind:
            raise CorruptIndexError(f"{directory}: header{suffix}.bin holds a {d.kind!r} index, not {cls.kind!r}",
                                    hint="load it with the matching class, or rebuild")
        return cls.from_data(d), seq
