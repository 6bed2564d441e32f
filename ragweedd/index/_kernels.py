"""numba kernels of the HNSW graph (DESIGN §7). Imported lazily by ragweedd.index.hnsw.

Similarity is the dot product of unit vectors (higher is closer). Heaps are fixed-size arrays: a
min-heap keyed by similarity holds the results (root = worst kept), and the candidate frontier is
the same min-heap keyed by negated similarity (root = best). ``visited`` is reused across queries:
a node is visited when ``visited[node] == gen``, so a query costs no O(n) clearing.

Graph arrays (all preallocated, capacity >= n):
  vecs (cap, dim) f32, links0 (cap, M0) i32, cnt0 (cap,) i32       layer 0
  levels (cap,) i8, uoff (cap,) i32                                 top layer of a node, first pool row
  ulinks (rows, M) i32, ucnt (rows,) i32                            layer l of node x is row uoff[x]+l-1
  deleted (cap,) u8                                                 tombstones: traversed, never returned
Readers may run while a writer links new nodes: they ignore ids >= the n they were given, and every
id ever written into a list is a valid node, so a torn read only costs a slightly worse path.
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np

from ragweedd.index.numba_env import ensure_usable_cache

ensure_usable_cache()

import numba  # noqa: E402
from numba import njit, prange  # noqa: E402


class _JitOptions(TypedDict):
    # a TypedDict, not a plain dict, so that njit's typed keywords accept it unpacked
    cache: bool
    fastmath: bool
    nogil: bool
    boundscheck: bool


_JIT = _JitOptions(cache=True, fastmath=True, nogil=True, boundscheck=False)
_F32_MIN = np.float32(-3.4e38)


@njit(inline="always", **_JIT)
def _dot(vecs, i, q):
    s = np.float32(0.0)
    for d in range(q.shape[0]):
        s += vecs[i, d] * q[d]
    return s


@njit(inline="always", **_JIT)
def _dot2(vecs, i, j):
    s = np.float32(0.0)
    for d in range(vecs.shape[1]):
        s += vecs[i, d] * vecs[j, d]
    return s


@njit(inline="always", **_JIT)
def _hpush(keys, vals, size, k, v):
    i = size
    while i > 0:
        p = (i - 1) >> 1
        if keys[p] <= k:
            break
        keys[i] = keys[p]
        vals[i] = vals[p]
        i = p
    keys[i] = k
    vals[i] = v
    return size + 1


@njit(inline="always", **_JIT)
def _hsift(keys, vals, size, k, v):
    """Place (k, v) at the root of a heap of ``size`` items and sift it down."""
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and keys[c + 1] < keys[c]:
            c += 1
        if keys[c] >= k:
            break
        keys[i] = keys[c]
        vals[i] = vals[c]
        i = c
    keys[i] = k
    vals[i] = v


@njit(inline="always", **_JIT)
def _hpop(keys, vals, size):
    size -= 1
    if size > 0:
        _hsift(keys, vals, size, keys[size], vals[size])
    return size


@njit(**_JIT)
def _greedy(q, vecs, ulinks, ucnt, uoff, n_limit, cur, top, bottom):
    """ef=1 descent from layer ``top`` down to layer ``bottom`` (exclusive); returns the node."""
    cursim = _dot(vecs, cur, q)
    for level in range(top, bottom, -1):
        changed = True
        while changed:
            changed = False
            row = uoff[cur] + level - 1
            c = ucnt[row]
            for j in range(c):
                nb = ulinks[row, j]
                if nb < 0 or nb >= n_limit:
                    continue
                s = _dot(vecs, nb, q)
                if s > cursim:
                    cursim = s
                    cur = nb
                    changed = True
    return cur


@njit(**_JIT)
def _search_layer(q, vecs, level, links0, cnt0, uoff, ulinks, ucnt, deleted, skip_deleted, n_limit,
                  first, seeds, ef, visited, gen, cand_k, cand_v, res_k, res_v):
    """Beam search of one layer seeded with ``first`` and ``seeds``; returns the result-heap size."""
    cs = 0
    rs = 0
    for si in range(-1, seeds.shape[0]):
        s = first if si < 0 else seeds[si]
        if s < 0 or s >= n_limit or visited[s] == gen:
            continue
        visited[s] = gen
        sim = _dot(vecs, s, q)
        cs = _hpush(cand_k, cand_v, cs, -sim, s)
        if not (skip_deleted and deleted[s]):
            if rs < ef:
                rs = _hpush(res_k, res_v, rs, sim, s)
            elif sim > res_k[0]:
                _hsift(res_k, res_v, rs, sim, s)
    while cs > 0:
        csim = -cand_k[0]
        c = cand_v[0]
        if rs >= ef and csim < res_k[0]:
            break
        cs = _hpop(cand_k, cand_v, cs)
        if level == 0:
            cnt = cnt0[c]
        else:
            row = uoff[c] + level - 1
            cnt = ucnt[row]
        for j in range(cnt):
            if level == 0:
                nb = links0[c, j]
            else:
                nb = ulinks[row, j]
            if nb < 0 or nb >= n_limit or visited[nb] == gen:
                continue
            visited[nb] = gen
            sim = _dot(vecs, nb, q)
            if rs < ef or sim > res_k[0]:
                cs = _hpush(cand_k, cand_v, cs, -sim, nb)
                if not (skip_deleted and deleted[nb]):
                    if rs < ef:
                        rs = _hpush(res_k, res_v, rs, sim, nb)
                    else:
                        _hsift(res_k, res_v, rs, sim, nb)
    return rs


@njit(**_JIT)
def _drain(res_k, res_v, rs, out_ids, out_sims, limit):
    """Empty the result heap into best-first arrays; returns how many of the best ``limit`` were written."""
    n = rs
    while rs > 0:
        rs -= 1
        if rs < limit:
            out_ids[rs] = res_v[0]
            out_sims[rs] = res_k[0]
        rs = _hpop(res_k, res_v, rs + 1)
    return min(n, limit)


@njit(**_JIT)
def search_one(q, k, ef, vecs, labels, links0, cnt0, uoff, ulinks, ucnt, deleted, n, entry, max_level,
               seeds, visited, gen, cand_k, cand_v, res_k, res_v, node_buf, out_labels, out_sims):
    if n == 0 or entry < 0:
        return 0
    cur = _greedy(q, vecs, ulinks, ucnt, uoff, n, entry, max_level, 0)
    e = max(ef, k)
    rs = _search_layer(q, vecs, 0, links0, cnt0, uoff, ulinks, ucnt, deleted, True, n,
                       cur, seeds, e, visited, gen, cand_k, cand_v, res_k, res_v)
    got = _drain(res_k, res_v, rs, node_buf, out_sims, k)
    for i in range(got):
        out_labels[i] = labels[node_buf[i]]
    return got


@njit(parallel=True, **_JIT)
def search_many(qs, k, ef, vecs, labels, links0, cnt0, uoff, ulinks, ucnt, deleted, n, entry, max_level,
                seeds, visited, gens, cand_k, cand_v, res_k, res_v, node_buf, out_labels, out_sims):
    """Queries split into one block per scratch row; each block runs on its own thread."""
    nblk = visited.shape[0]
    nq = qs.shape[0]
    for b in prange(nblk):
        for i in range(b, nq, nblk):
            g = gens[b] + np.uint32(1)
            if g == np.uint32(0xFFFFFFFF):
                visited[b, :] = 0
                g = np.uint32(1)
            gens[b] = g
            search_one(qs[i], k, ef, vecs, labels, links0, cnt0, uoff, ulinks, ucnt, deleted, n, entry,
                       max_level, seeds, visited[b], g, cand_k[b], cand_v[b], res_k[b], res_v[b],
                       node_buf[b], out_labels[i], out_sims[i])


@njit(parallel=True, **_JIT)
def batch_candidates(vecs, levels, links0, cnt0, uoff, ulinks, ucnt, deleted, n_fixed, b, entry, max_level,
                     efc, visited, gens, cand_k, cand_v, res_k, res_v, out_ids, out_sims, out_cnt):
    """Phase 1 of a batch insert: search each new node (rows n_fixed..n_fixed+b) against the fixed graph
    of the first n_fixed nodes, in parallel. out_*[i, l] holds the ef_construction best at layer l."""
    nblk = visited.shape[0]
    no_seeds = np.empty(0, dtype=np.int32)
    for blk in prange(nblk):
        for i in range(blk, b, nblk):
            node = n_fixed + i
            q = vecs[node]
            top = min(np.int64(levels[node]), np.int64(max_level))
            cur = _greedy(q, vecs, ulinks, ucnt, uoff, n_fixed, entry, max_level, top)
            for level in range(top, -1, -1):
                g = gens[blk] + np.uint32(1)
                if g == np.uint32(0xFFFFFFFF):
                    visited[blk, :] = 0
                    g = np.uint32(1)
                gens[blk] = g
                # Tombstoned nodes stay link candidates (as in hnswlib): skipping them could leave new
                # nodes unreachable when everything near them, or the entry point, was deleted.
                rs = _search_layer(q, vecs, level, links0, cnt0, uoff, ulinks, ucnt, deleted, False, n_fixed,
                                   cur, no_seeds, efc, visited[blk], g, cand_k[blk], cand_v[blk],
                                   res_k[blk], res_v[blk])
                got = _drain(res_k[blk], res_v[blk], rs, out_ids[i, level], out_sims[i, level], efc)
                out_cnt[i, level] = got
                if got > 0:
                    cur = out_ids[i, level, 0]


@njit(**_JIT)
def _heuristic(vecs, ids, sims, count, m, out):
    """hnswlib's getNeighborsByHeuristic2 on a best-first list: keep a candidate unless an already kept
    neighbour is closer to it than the query is. Returns how many were kept."""
    if count <= m:
        for i in range(count):
            out[i] = ids[i]
        return count
    kept = 0
    for c in range(count):
        if kept >= m:
            break
        cid = ids[c]
        good = True
        for s in range(kept):
            if _dot2(vecs, cid, out[s]) > sims[c]:
                good = False
                break
        if good:
            out[kept] = cid
            kept += 1
    return kept


@njit(**_JIT)
def _connect(vecs, links0, cnt0, uoff, ulinks, ucnt, level, src, dst, m_max, tmp_ids, tmp_sims, sel):
    """Add the edge src -> dst at ``level``; a full list is re-pruned with the heuristic."""
    if level == 0:
        c = cnt0[src]
        if c < m_max:
            links0[src, c] = dst
            cnt0[src] = c + 1
            return
        for j in range(c):
            tmp_ids[j] = links0[src, j]
    else:
        row = uoff[src] + level - 1
        c = ucnt[row]
        if c < m_max:
            ulinks[row, c] = dst
            ucnt[row] = c + 1
            return
        for j in range(c):
            tmp_ids[j] = ulinks[row, j]
    tmp_ids[c] = dst
    for j in range(c + 1):
        tmp_sims[j] = _dot2(vecs, tmp_ids[j], src)
    order = np.argsort(-tmp_sims[: c + 1])
    sids = tmp_ids[: c + 1][order]
    ssims = tmp_sims[: c + 1][order]
    kept = _heuristic(vecs, sids, ssims, c + 1, m_max, sel)
    if level == 0:
        for j in range(kept):
            links0[src, j] = sel[j]
        cnt0[src] = kept
    else:
        for j in range(kept):
            ulinks[row, j] = sel[j]
        ucnt[row] = kept


@njit(**_JIT)
def link_batch(vecs, levels, links0, cnt0, uoff, ulinks, ucnt, n_fixed, b, covered, cand_ids, cand_sims,
               cand_cnt, M, M0, efc, state):
    """Phase 2, serial: link each new node to its phase-1 candidates merged with the nodes inserted
    earlier in the same batch (compared exactly, so a batch never misses its own members).
    state = [entry, max_level] is updated in place."""
    width = efc + b + 1
    tmp_ids = np.empty(width, dtype=np.int32)
    tmp_sims = np.empty(width, dtype=np.float32)
    sel = np.empty(max(M0, M) + 1, dtype=np.int32)
    p_ids = np.empty(max(M0, M) + 1, dtype=np.int32)
    p_sims = np.empty(max(M0, M) + 1, dtype=np.float32)
    p_sel = np.empty(max(M0, M) + 1, dtype=np.int32)
    for i in range(b):
        node = n_fixed + i
        li = np.int64(levels[node])
        if state[0] < 0:
            state[0] = node
            state[1] = li
            continue
        for level in range(li, -1, -1):
            cnt = 0
            if level <= covered[i]:
                for j in range(cand_cnt[i, level]):
                    tmp_ids[cnt] = cand_ids[i, level, j]
                    tmp_sims[cnt] = cand_sims[i, level, j]
                    cnt += 1
            for j in range(i):
                other = n_fixed + j
                if levels[other] >= level:
                    tmp_ids[cnt] = other
                    tmp_sims[cnt] = _dot2(vecs, node, other)
                    cnt += 1
            if cnt == 0:
                continue
            order = np.argsort(-tmp_sims[:cnt])
            if cnt > efc:
                order = order[:efc]
                cnt = efc
            sids = tmp_ids[order]
            ssims = tmp_sims[order]
            kept = _heuristic(vecs, sids, ssims, cnt, M, sel)
            if level == 0:
                for j in range(kept):
                    links0[node, j] = sel[j]
                cnt0[node] = kept
            else:
                row = uoff[node] + level - 1
                for j in range(kept):
                    ulinks[row, j] = sel[j]
                ucnt[row] = kept
            m_max = M0 if level == 0 else M
            for j in range(kept):
                _connect(vecs, links0, cnt0, uoff, ulinks, ucnt, level, sel[j], node, m_max,
                         p_ids, p_sims, p_sel)
        if li > state[1]:
            state[0] = node
            state[1] = li


def num_threads() -> int:
    return numba.get_num_threads()
