"""Ranking metrics against rankings computed by hand."""

import math

import pytest

from ragweedd.eval.metrics import average_precision, bootstrap_ci, mrr_at, ndcg_at, per_query, recall_at, summarise

L2 = math.log2


def test_ndcg_hand_computed():
    # relevant b (rank 2) and d (rank 4); ideal: two relevant at ranks 1, 2
    dcg = 1 / L2(3) + 1 / L2(5)
    ideal = 1 + 1 / L2(3)
    assert ndcg_at(["a", "b", "c", "d"], {"b": 1, "d": 1}, 10) == pytest.approx(dcg / ideal)
    assert ndcg_at(["b", "d"], {"b": 1, "d": 1}, 10) == pytest.approx(1.0)
    # cut at k=3 loses d; the ideal DCG is also cut at 3 (both fit)
    assert ndcg_at(["a", "b", "c", "d"], {"b": 1, "d": 1}, 3) == pytest.approx((1 / L2(3)) / ideal)


def test_ndcg_graded_gain_is_linear():
    # pytrec_eval's gain is the grade itself: grades 2 at rank 2, 1 at rank 1
    dcg = 1 + 2 / L2(3)
    ideal = 2 + 1 / L2(3)
    assert ndcg_at(["x", "y"], {"x": 1, "y": 2}, 10) == pytest.approx(dcg / ideal)


def test_recall_mrr_map_hand_computed():
    ranking = ["a", "b", "c", "d", "e"]
    q = {"b": 1, "e": 1, "z": 1}
    assert recall_at(ranking, q, 10) == pytest.approx(2 / 3)
    assert recall_at(ranking, q, 2) == pytest.approx(1 / 3)
    assert mrr_at(ranking, q, 10) == pytest.approx(1 / 2)
    assert mrr_at(ranking, q, 1) == 0.0
    # AP: precision at b = 1/2, at e = 2/5; z never retrieved counts 0; / 3 relevant
    assert average_precision(ranking, q) == pytest.approx((1 / 2 + 2 / 5) / 3)


def test_no_results_and_zero_grades():
    assert ndcg_at([], {"a": 1}, 10) == 0.0
    assert recall_at([], {"a": 1}, 10) == 0.0
    assert mrr_at(["b"], {"a": 1, "b": 0}, 10) == 0.0
    assert average_precision(["a"], {"a": 0}) == 0.0


def test_per_query_skips_queries_without_relevant_docs_and_counts_missing_runs():
    vals = per_query({"q1": ["a"]}, {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}})
    assert vals["ndcg@10"] == [1.0, 0.0]  # q2 has no run -> 0; q3 has nothing relevant -> skipped
    s = summarise({"q1": ["a"]}, {"q1": {"a": 1}, "q2": {"b": 1}}, samples=200)
    assert s["mrr@10"]["mean"] == pytest.approx(0.5)
    assert s["mrr@10"]["queries"] == 2


def test_bootstrap_interval_brackets_the_mean_and_shrinks_with_n():
    small = [0.0, 1.0] * 10
    big = [0.0, 1.0] * 1000
    lo1, hi1 = bootstrap_ci(small, samples=500)
    lo2, hi2 = bootstrap_ci(big, samples=500)
    assert lo1 < 0.5 < hi1 and lo2 < 0.5 < hi2
    assert hi2 - lo2 < (hi1 - lo1) / 3
    assert bootstrap_ci([0.7] * 50) == pytest.approx((0.7, 0.7))
    assert bootstrap_ci([]) == (0.0, 0.0)
