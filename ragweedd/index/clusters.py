"""Cluster analysis of the chunks of a collection and the HNSW entry points it yields (DESIGN §7).

Chunks are grouped by (text_entropy, word_count): each chunk first gets a kind by the design's rules,
in this order

  garbage        H > 7.0 bits/char                      excluded
  sparse         H < 0.5 and fewer than 5 words          excluded
  boilerplate    H < 2.5
  technical      fewer than 30 words (code, tables, references)
  natural        everything else (prose)

and within a kind chunks are split into cells of 0.5 bits of entropy x a power of two of word count.
A cell holding fewer than 0.5% of the chunks is a micro-cluster: reported, but it gives no entry
points (a handful of outliers should not take seeds from the bulk of the collection). From every
other kept cell, the chunks whose entropy lies within 1.5 sigma of the cell's mean are eligible;
at most 1,000 entry points are chosen in all, the budget shared evenly across cells (a cell with too
few eligible chunks hands its leftover to the others) and, inside a cell, spread evenly over its
eligible chunks in label order (label order follows ingest order, so seeds come from many documents).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ragweedd.errors import InvalidVectorError

if TYPE_CHECKING:
    import numpy.typing as npt

KINDS = ("garbage", "sparse", "boilerplate", "technical", "natural")
EXCLUDED = ("garbage", "sparse")


@dataclass(frozen=True)
class ClusterParams:
    garbage_entropy: float = 7.0
    empty_entropy: float = 0.5
    empty_words: int = 5
    boilerplate_entropy: float = 2.5
    technical_words: int = 30
    micro_fraction: float = 0.005
    sigma: float = 1.5
    max_entry_points: int = 1000
    entropy_bin: float = 0.5


@dataclass
class ClusterResult:
    entry_labels: np.ndarray
    stats: dict = field(default_factory=dict)


def classify(entropy: np.ndarray, words: np.ndarray, p: ClusterParams = ClusterParams()) -> np.ndarray:
    """Kind index (into KINDS) of every chunk; a NaN entropy counts as garbage."""
    kind = np.full(entropy.shape, 4, np.int8)
    kind[words < p.technical_words] = 3
    kind[entropy < p.boilerplate_entropy] = 2
    kind[(entropy < p.empty_entropy) & (words < p.empty_words)] = 1
    kind[~(entropy <= p.garbage_entropy)] = 0
    return kind


def analyse(labels: npt.ArrayLike, text_entropy: npt.ArrayLike, word_count: npt.ArrayLike,
            params: ClusterParams | None = None) -> ClusterResult:
    p = params or ClusterParams()
    lab = np.asarray(labels, dtype=np.int64).ravel()
    ent = np.asarray(text_entropy, dtype=np.float64).ravel()
    wc = np.asarray(word_count, dtype=np.float64).ravel()
    if not lab.size == ent.size == wc.size:
        raise InvalidVectorError(
            f"cluster analysis needs one entropy and one word count per label, got {lab.size} labels, "
            f"{ent.size} entropies, {wc.size} word counts")
    if wc.size and (np.isnan(wc).any() or wc.min() < 0):
        raise InvalidVectorError("word counts must be >= 0 (a chunk without metadata should be left out)")
    n = lab.size
    kind = classify(ent, wc, p)
    hbin = np.where(np.isfinite(ent), np.floor(np.nan_to_num(ent) / p.entropy_bin), -1).astype(np.int64)
    wbin = np.floor(np.log2(wc + 1)).astype(np.int64)
    cells: dict[tuple[int, int, int], np.ndarray] = {}
    if n:
        key = np.stack([kind.astype(np.int64), hbin, wbin], axis=1)
        uniq, inverse = np.unique(key, axis=0, return_inverse=True)
        inverse = inverse.ravel()
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(uniq.shape[0] + 1))
        for c in range(uniq.shape[0]):
            k, hb, wb = (int(x) for x in uniq[c])
            cells[(k, hb, wb)] = order[bounds[c]:bounds[c + 1]]
    micro_min = p.micro_fraction * n
    clusters: list[dict[str, Any]] = []
    eligible: list[tuple[dict[str, Any], np.ndarray]] = []
    for (k, hb, wb), members in sorted(cells.items()):
        e = ent[members]
        finite = np.isfinite(e)
        mean = float(e[finite].mean()) if finite.any() else float("nan")
        std = float(e[finite].std()) if finite.any() else float("nan")
        label = KINDS[k]
        micro = members.size < micro_min
        info = {
            "id": len(clusters), "kind": label, "label": "micro-cluster" if micro and label not in EXCLUDED else label,
            "excluded": label in EXCLUDED, "size": int(members.size),
            "entropy_bin": [round(hb * p.entropy_bin, 3), round((hb + 1) * p.entropy_bin, 3)] if hb >= 0 else None,
            "word_count_bin": [int(2**wb - 1), int(2 ** (wb + 1) - 1)],
            "entropy_mean": round(mean, 4) if mean == mean else None,
            "entropy_std": round(std, 4) if std == std else None,
            "word_count_mean": round(float(wc[members].mean()), 2), "entry_points": 0,
        }
        clusters.append(info)
        if label in EXCLUDED or micro:
            continue
        near = members[np.abs(e - mean) <= p.sigma * std + 1e-9]
        eligible.append((info, np.sort(lab[near])))
    chosen = _spread(eligible, p.max_entry_points)
    entry = np.concatenate(chosen) if chosen else np.zeros(0, np.int64)
    counts = {kname: int((kind == i).sum()) for i, kname in enumerate(KINDS)}
    stats = {
        "chunks": int(n), "kinds": counts, "excluded": int(sum(counts[x] for x in EXCLUDED)),
        "micro_clusters": int(sum(1 for c in clusters if c["label"] == "micro-cluster")),
        "entry_points": int(entry.size), "clusters": clusters,
        "params": {k: getattr(p, k) for k in p.__dataclass_fields__},
    }
    return ClusterResult(entry_labels=entry.astype(np.int64), stats=stats)


def _spread(eligible: list[tuple[dict[str, Any], np.ndarray]], budget: int) -> list[np.ndarray]:
    """Share ``budget`` evenly across cells, re-dealing what small cells cannot use."""
    if not eligible or budget <= 0:
        return []
    quota = {i: 0 for i in range(len(eligible))}
    left, open_ = budget, [i for i, (_, lab) in enumerate(eligible) if lab.size]
    while left > 0 and open_:
        share = max(left // len(open_), 1)
        nxt = []
        for i in open_:
            if left <= 0:
                break
            room = eligible[i][1].size - quota[i]
            take = min(share, room, left)
            quota[i] += take
            left -= take
            if quota[i] < eligible[i][1].size:
                nxt.append(i)
        open_ = nxt
    out = []
    for i, (info, lab) in enumerate(eligible):
        q = quota[i]
        if q <= 0:
            continue
        pick = np.unique(np.linspace(0, lab.size - 1, q).round().astype(np.int64))
        info["entry_points"] = int(pick.size)
        out.append(lab[pick])
    return out
