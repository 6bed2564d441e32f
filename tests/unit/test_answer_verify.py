"""Verified citations (ragweedd/answer/verify.py): the measured test set of correct and deliberately
wrong citations, where a check points in the source, and how claims are cut from an answer."""

import json
from pathlib import Path

import pytest

from ragweedd.answer.verify import claims, names, numbers, verify, yes_no  # noqa: E402

DATA = json.loads((Path(__file__).resolve().parents[1] / "data" / "citations.json").read_text(encoding="utf-8"))


def flagged(answer: str) -> bool:
    """Whether the check flags the claim's wrong citation (its last one)."""
    checks = verify(answer, DATA["sources"])
    assert checks, answer
    return not checks[-1]["supported"]


def test_the_test_set_is_what_docs_answers_md_reports():
    by_kind: dict[str, list[bool]] = {}
    for c in DATA["claims"]:
        if c["kind"] == "correct":
            checks = verify(c["answer"], DATA["sources"])
            by_kind.setdefault("correct", []).append(any(not x["supported"] for x in checks))
        else:
            by_kind.setdefault(c["kind"], []).append(flagged(c["answer"]))
    assert len(by_kind["correct"]) == 20 and sum(by_kind["correct"]) == 1  # "Talks were held" (a paraphrase)
    assert all(by_kind["wrong_number"]) and len(by_kind["wrong_number"]) == 7
    assert all(by_kind["wrong_source"]) and len(by_kind["wrong_source"]) == 8
    assert sum(by_kind["swapped_entity"]) == 6 and len(by_kind["swapped_entity"]) == 7  # "outer" for "inner"


def test_a_wrong_number_is_named_and_the_closest_sentence_is_placed_exactly():
    src = {"n": 1, "text": "Intro line.\nAcme reported revenue of $4.2 billion in 2022. Margin fell.",
           "span": [1000, 1070]}
    (c,) = verify("Acme's revenue was $5.2 billion in 2022 [1].", [src])
    assert c["supported"] is False and c["missing"][0] == "5.2" and c["n"] == 1
    best = c["source_sentence"]
    a, b = best["offsets"]
    assert src["text"][a:b] == best["text"] == "Acme reported revenue of $4.2 billion in 2022."
    assert best["span"] == [1000 + a, 1000 + b]
    (ok,) = verify("Acme's revenue was $4.2 billion in 2022 [1].", [src])
    assert ok["supported"] is True and ok["missing"] == [] and ok["method"] == "terms"
    (no_span,) = verify("Acme's revenue was $4.2 billion in 2022 [1].", [{**src, "span": None}])
    assert no_span["source_sentence"]["span"] is None


def test_claims_marks_after_the_full_stop_belong_to_the_sentence_before():
    ans = "The treaty was signed in 1648. [1] It ended the war [2]. No citation here."
    cs = claims(ans)
    assert [(c.text, c.cites) for c in cs] == [("The treaty was signed in 1648.", [1]), ("It ended the war.", [2])]
    assert ans[cs[1].start:cs[1].end].startswith("It ended the war")


def test_terms():
    assert numbers("revenue of 1,200 and 3.5% in 2022") == {"1200", "3.5", "2022"}
    assert names("Sales at Acme Corp and the iPhone rose in COVID-19 times") == {"acme", "corp", "iphone", "covid-19"}
    assert names("The Eiffel Tower's height") == {"eiffel", "tower"}


def test_a_citation_of_a_missing_source_is_unsupported():
    (c,) = verify("It rose 5% [7].", DATA["sources"])
    assert c["n"] == 7 and c["supported"] is False and c["no_source"] is True and c["source_sentence"] is None


@pytest.mark.parametrize("min_support,expect", [(0.6, True), (0.95, False)])
def test_min_support(min_support, expect):
    (c,) = verify("Revenue grew 12% [3].", DATA["sources"], min_support=min_support)
    assert c["supported"] is expect and c["score"] == pytest.approx(2 / 3, abs=1e-3)


def test_yes_no():
    assert yes_no("Yes.") is True and yes_no("no, it does not") is False
    assert yes_no("The passage says yes") is True
    assert yes_no("maybe") is None and yes_no("it could be yes or no") is None


NOTES = [{"n": 5, "text": "Note 6. The barge carried 600 tons of coal to the mill."},
         {"n": 6, "text": "Note 20. The warehouse stored 2000 tons of salt."}]


def test_an_unrelated_second_source_sharing_only_common_words_is_flagged():
    """[6] holds "note" and "tons" but none of the claim's numbers, names or own terms."""
    five, six = verify("Note 6 carried 600 tons [5][6].", NOTES)
    assert five["supported"] is True
    assert six["n"] == 6 and six["supported"] is False and six["score"] == 0.4
    assert six["missing"] == ["6", "600", "carried"]  # as the claim writes it, not the stem "carri"


def test_several_sources_each_holding_a_different_part_are_all_supported():
    srcs = [{"n": 1, "text": "Acme reported revenue of $4.2 billion in 2022."},
            {"n": 2, "text": "The chief executive of Acme is Jane Doe, appointed in 2019."},
            {"n": 3, "text": "The barge carried 600 tons of coal to the mill and revenue grew."}]
    checks = verify("Acme, led by Jane Doe since 2019, reported revenue of $4.2 billion in 2022 [1][2].", srcs)
    assert [(c["n"], c["supported"]) for c in checks] == [(1, True), (2, True)]
    # terms only, no numbers or names: each holds one the other lacks
    terms = [{"n": 1, "text": "The valve was replaced after the leak."},
             {"n": 2, "text": "The pump was inspected after the leak."}]
    checks = verify("After the leak the valve was replaced and the pump inspected [1][2].", terms)
    assert [c["supported"] for c in checks] == [True, True]
    # the same two, with a third that shares only "leak"
    checks = verify("After the leak the valve was replaced and the pump inspected [1][2][3].",
                    terms + [{"n": 3, "text": "A leak is a hole."}])
    assert [c["supported"] for c in checks] == [True, True, False]


REVENUE = {"n": 1, "text": "Segment results (in millions). Percentage of total revenue 9% 11% 11%. "
                           "Total revenue $ 4,795.5 $ 4,300.1. Employees 12,000."}


def test_a_scaled_number_matches_its_rounded_value_in_a_table_in_millions():
    (c,) = verify("Total revenue was $4.8 billion [1].", [REVENUE])
    assert c["supported"] is True and c["score"] == 1.0
    assert c["source_sentence"]["text"] == "Total revenue $ 4,795.5 $ 4,300.1."
    # a wrong value is still wrong, and written as the claim writes it
    (bad,) = verify("Total revenue was $4.9 billion [1].", [REVENUE])
    assert bad["supported"] is False and bad["missing"] == ["4.9"]
    # the claim's precision decides: 4.800 billion is not 4,795.5 million
    (fine,) = verify("Total revenue was $4.800 billion [1].", [REVENUE])
    assert fine["supported"] is False
    # "12k" employees is 12,000; a bare number is matched as written only
    (k,) = verify("Total revenue came with 12k employees [1].", [REVENUE])
    assert "12" not in k["missing"]
    (bare,) = verify("There were 4.8 employees [1].", [REVENUE])
    assert "4.8" in bare["missing"]
