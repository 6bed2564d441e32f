import pytest

from ragweedd.answer.citations import check_citations, cited_numbers, is_pure_refusal, is_refusal
from ragweedd.answer.prompts import REFUSAL


@pytest.mark.parametrize("text,expected", [
    ("Cats purr [1].", [1]),
    ("Both [1, 3] and [2][3].", [1, 3, 2]),
    ("Semicolons [4; 2] and no space [5,6].", [4, 2, 5, 6]),
    ("A range [2-4] and an en dash [6–7].", [2, 3, 4, 6, 7]),
    ("Spaces inside [ 8 ].", [8]),
    ("A link [1](http://example.com) is not a citation.", []),
    ("Page labels like [p.3] and words [note] are not citations.", []),
    ("No citations at all.", []),
    ("", []),
    ("Repeated [2] and [2] once.", [2]),
    ("Absurd range [1-9999] keeps its ends only.", [1, 9999]),
])
def test_cited_numbers(text, expected):
    assert cited_numbers(text) == expected


def test_check_citations_reports_nonexistent_sources():
    r = check_citations("A [1]. B [0]. C [3][4]. D [1, 9].", 3)
    assert r == {"cited": [1, 3], "invalid": [0, 4, 9]}


def test_check_citations_with_no_sources_marks_all_invalid():
    assert check_citations("A [1].", 0) == {"cited": [], "invalid": [1]}


@pytest.mark.parametrize("text", [
    REFUSAL,
    REFUSAL.upper(),
    "  " + REFUSAL.replace(" ", "  ") + "\n",
    REFUSAL[:-1],  # without the full stop
    "**" + REFUSAL + "**",
])
def test_refusal_detected_despite_case_spacing_markup(text):
    assert is_refusal(text)
    assert is_pure_refusal(text)


def test_partial_refusal_is_refusal_but_not_pure():
    text = f"Cats purr [1]. {REFUSAL}"
    assert is_refusal(text) and not is_pure_refusal(text)


@pytest.mark.parametrize("text", ["Cats purr [1].", "The documents answer this question [1].", ""])
def test_non_refusals(text):
    assert not is_refusal(text)
