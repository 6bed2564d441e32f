"""Ranking metrics as BEIR / pytrec_eval define them, and bootstrap confidence intervals.

``ranking`` is a list of document ids, best first (no repeats); ``qrels`` maps document id ->
graded relevance (> 0 is relevant). Per-query values are averaged over the queries that have at
least one relevant document; a query with no results scores 0.

- nDCG@k: DCG = sum over ranks i (1-based) of rel_i / log2(i + 1) (linear gain, as pytrec_eval),
  divided by the DCG of the ideal ordering of the judged documents.
- Recall@k: relevant documents in the top k / all relevant documents.
- MRR@k: 1 / rank of the first relevant document within the top k, else 0.
- MAP (AP over the full ranking): mean over relevant documents of precision at each relevant rank;
  relevant documents never retrieved count as precision 0.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

Qrels = Mapping[str, int]


def dcg(gains: Sequence[float]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def ndcg_at(ranking: Sequence[str], qrels: Qrels, k: int) -> float:
    ideal = dcg(sorted((g for g in qrels.values() if g > 0), reverse=True)[:k])
    if ideal == 0:
        return 0.0
    return dcg([max(qrels.get(d, 0), 0) for d in ranking[:k]]) / ideal


def recall_at(ranking: Sequence[str], qrels: Qrels, k: int) -> float:
    rel = {d for d, g in qrels.items() if g > 0}
    if not rel:
        return 0.0
    return len(rel & set(ranking[:k])) / len(rel)


def mrr_at(ranking: Sequence[str], qrels: Qrels, k: int) -> float:
    for i, d in enumerate(ranking[:k]):
        if qrels.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def average_precision(ranking: Sequence[str], qrels: Qrels) -> float:
    rel = {d for d, g in qrels.items() if g > 0}
    if not rel:
        return 0.0
    hits, total = 0, 0.0
    for i, d in enumerate(ranking):
        if d in rel:
            hits += 1
            total += hits / (i + 1)
    return total / len(rel)


METRICS: dict[str, Callable[[Sequence[str], Qrels], float]] = {
    "ndcg@10": lambda r, q: ndcg_at(r, q, 10),
    "recall@10": lambda r, q: recall_at(r, q, 10),
    "recall@100": lambda r, q: recall_at(r, q, 100),
    "mrr@10": lambda r, q: mrr_at(r, q, 10),
    "map": average_precision,
}


def per_query(runs: Mapping[str, Sequence[str]], qrels: Mapping[str, Qrels]) -> dict[str, list[float]]:
    """metric -> values, one per judged query (in sorted query-id order)."""
    out: dict[str, list[float]] = {m: [] for m in METRICS}
    for qid in sorted(qrels):
        if not any(g > 0 for g in qrels[qid].values()):
            continue
        ranking = list(runs.get(qid, []))
        for name, fn in METRICS.items():
            out[name].append(fn(ranking, qrels[qid]))
    return out


def bootstrap_ci(values: Sequence[float], *, samples: int = 1000, alpha: float = 0.05,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (resampling queries with replacement)."""
    import numpy as np

    n = len(values)
    if n == 0:
        return 0.0, 0.0
    rng = np.random.default_rng(seed)
    vals = np.asarray(values, dtype=np.float64)
    means = vals[rng.integers(0, n, size=(samples, n))].mean(axis=1)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def summarise(runs: Mapping[str, Sequence[str]], qrels: Mapping[str, Qrels], *, samples: int = 1000,
              seed: int = 0) -> dict[str, dict[str, float]]:
    """metric -> {"mean", "lo", "hi"} (95 % bootstrap interval), plus "queries"."""
    pq = per_query(runs, qrels)
    out: dict[str, dict[str, float]] = {}
    for name, vals in pq.items():
        mean = sum(vals) / len(vals) if vals else 0.0
        lo, hi = bootstrap_ci(vals, samples=samples, seed=seed)
        out[name] = {"mean": mean, "lo": lo, "hi": hi, "queries": len(vals)}
    return out
