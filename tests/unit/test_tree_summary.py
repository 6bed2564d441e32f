"""Extractive section summaries start at a full sentence after the heading, even when the chunk
(whose overlap with the one before can begin mid-word) starts inside a word or inside the heading."""

from __future__ import annotations

import pytest

from ragweedd.answer.tree import Node, extractive_summary

BODY = "The following discussion compares fiscal 2015 with fiscal 2014. Revenue grew eleven percent."


@pytest.mark.parametrize("title, text", [
    # the overlap ends the previous section mid-word, then the heading
    ("RESULTS OF OPERATIONS", "inancial Statements. RESULTS OF OPERATIONS " + BODY),
    # the chunk starts inside the heading
    ("RESULTS OF OPERATIONS", "PERATIONS " + BODY),
    # mid-word, heading not in the text: the next sentence
    ("Overview", "inancial Statements are audited. " + BODY),
    # a clean start stays as it is
    ("Overview", BODY),
    ("Overview", "Overview: " + BODY),
])
def test_summary_starts_at_a_full_sentence(title, text):
    n = Node(id="1", title=title, path=[title], text=[text])
    assert extractive_summary(n).startswith("The following discussion compares fiscal 2015")


def test_a_title_word_inside_a_sentence_is_not_taken_for_the_heading():
    n = Node(id="1", title="Revenue", path=["Revenue"], text=[BODY])
    assert extractive_summary(n).startswith("The following discussion")


def test_mid_word_without_a_sentence_end_starts_at_the_next_word():
    n = Node(id="1", title="Notes", path=["Notes"], text=["inancial statements are audited by a firm"])
    assert extractive_summary(n) == "statements are audited by a firm"


def test_a_markdown_heading_marker_is_skipped_and_the_next_heading_ends_the_summary():
    n = Node(id="1", title="Notes", path=["Notes"], text=["# Notes\n\nKeep the shed locked.\n\n## Tools\n\nRakes."])
    assert extractive_summary(n) == "Keep the shed locked."


@pytest.mark.parametrize("title, text", [
    ("Item 6. Selected Financial Data", "AL DATA " + BODY),
    ("Summary of Trademarks", "TRADEMARKS " + BODY),
    ("Legal Proceedings", ". " + BODY),
    ("Debt", ",086 " + BODY),
    ("Item 4. Mine Safety Disclosures", "S " + BODY),
    ("Available Information", "-K and amendments are filed. " + BODY),
])
def test_fragments_of_a_heading_number_or_sentence_are_skipped(title, text):
    n = Node(id="1", title=title, path=[title], text=[text])
    assert extractive_summary(n).startswith("The following discussion compares fiscal 2015")


def test_a_heading_word_that_starts_the_text_is_kept():
    n = Node(id="1", title="Income Taxes", path=["Income Taxes"], text=["Taxes are recorded as incurred."])
    assert extractive_summary(n) == "Taxes are recorded as incurred."
