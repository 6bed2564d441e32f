"""Cluster analysis: kinds, exclusions, micro-clusters, entry-point budget and spread."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragweedd.chunk.entropy import shannon_entropy, word_count
from ragweedd.errors import InvalidVectorError
from ragweedd.index.clusters import ClusterParams, analyse, classify


def test_classify_rules():
    ent = np.array([7.5, 0.2, 0.2, 2.0, 4.0, 4.0, np.nan])
    wc = np.array([100, 3, 10, 100, 10, 100, 50])
    kinds = classify(ent, wc)
    assert kinds.tolist() == [0, 1, 2, 2, 3, 4, 0]  # garbage sparse boilerplate boilerplate technical natural garbage


def make(n_per, groups, seed=0):
    rng = np.random.default_rng(seed)
    ent, wc = [], []
    for (mu, words) in groups:
        ent.append(np.clip(rng.normal(mu, 0.08, n_per), 0, 8))
        wc.append(np.full(n_per, words))
    return np.arange(n_per * len(groups)), np.concatenate(ent), np.concatenate(wc)


def test_excluded_and_micro_clusters_give_no_entry_points():
    labels, ent, wc = make(1000, [(4.2, 200), (4.2, 12), (1.5, 100), (7.6, 300), (0.2, 2)])
    # three odd chunks: a micro-cluster (< 0.5% of 5003)
    labels = np.append(labels, [90001, 90002, 90003])
    ent = np.append(ent, [5.9, 5.9, 5.9])
    wc = np.append(wc, [3000, 3000, 3000])
    res = analyse(labels, ent, wc)
    ep = set(res.entry_labels.tolist())
    assert not ep & set(range(3000, 5000))  # garbage and sparse excluded
    assert not ep & {90001, 90002, 90003}
    assert res.stats["micro_clusters"] >= 1
    kinds = {c["kind"] for c in res.stats["clusters"] if c["entry_points"]}
    assert kinds == {"natural", "technical", "boilerplate"}
    assert res.stats["excluded"] == 2000
    json.dumps(res.stats)  # goes into index_meta.json as is


def test_budget_is_shared_evenly_and_respects_sigma():
    labels, ent, wc = make(2000, [(4.1, 200), (4.1, 12), (1.6, 100)])
    res = analyse(labels, ent, wc)
    assert res.entry_labels.size == 1000
    per = [c["entry_points"] for c in res.stats["clusters"] if c["entry_points"]]
    assert max(per) - min(per) <= 2 * 1000 // len(per)  # even shares across cells
    for c in res.stats["clusters"]:
        if c["entry_points"]:
            e = res.entry_labels
            members = e[(ent[e] >= c["entropy_bin"][0]) & (ent[e] < c["entropy_bin"][1]) &
                        (np.floor(np.log2(wc[e] + 1)) == np.log2(c["word_count_bin"][0] + 1))]
            assert np.all(np.abs(ent[members] - c["entropy_mean"]) <= 1.5 * c["entropy_std"] + 1e-3)
    # spread evenly inside a cell: picks are not all from the first labels
    assert np.ptp(res.entry_labels[res.entry_labels < 2000]) > 1500


def test_small_collection_takes_everything_eligible():
    labels, ent, wc = make(100, [(4.0, 50)])
    res = analyse(labels, ent, wc, ClusterParams(max_entry_points=1000))
    assert 80 <= res.entry_labels.size <= 100
    assert len(set(res.entry_labels.tolist())) == res.entry_labels.size


def test_empty_input():
    res = analyse([], [], [])
    assert res.entry_labels.size == 0 and res.stats["chunks"] == 0


@pytest.mark.parametrize("args,match", [
    (([1, 2], [3.0], [5, 6]), "same length|one entropy"),
    (([1], [3.0], [-2]), ">= 0"),
    (([1], [3.0], [float("nan")]), ">= 0"),
])
def test_bad_input(args, match):
    with pytest.raises(InvalidVectorError, match=match):
        analyse(*args)


def test_real_text_kinds():
    texts = [
        "The mitochondrion is the powerhouse of the cell, producing ATP through oxidative phosphorylation "
        "in a series of reactions that depend on oxygen and a proton gradient across the inner membrane.",
        "def f(x):\n    return x * 2",
        "na " * 100,
        "",
    ]
    ent = np.array([shannon_entropy(t) for t in texts])
    wc = np.array([word_count(t) for t in texts])
    assert classify(ent, wc).tolist() == [4, 3, 2, 1]
