"""Verified citations (ragweedd/answer/verify.py): the measured test set of correct and deliberately
wrong citations, where a check points in the source, and how claims are cut from an answer."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

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
