"""A hit's snippet (query/snippet.py): about 300 characters centred on the densest run of the
query's words, cut at word boundaries with "…" at cut ends, and the [start, end) offsets of every
matched word (case, accents and stems ignored; function words not marked)."""

from __future__ import annotations

from ragweedd.query.snippet import SNIPPET_CHARS, add_snippets, make_snippet

FILLER = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. "
TAIL = "Sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. "


def words(snippet: str, marks: list[list[int]]) -> list[str]:
    return [snippet[a:b] for a, b in marks]


def test_centred_on_the_densest_run_of_query_words_cut_at_words():
    # one lone "tea" early on; the passage that holds all the words is in the middle
    text = "tea " + FILLER * 10 + "Green tea should steep for two minutes. Steeping Crème longer. " + TAIL * 10
    snippet, marks = make_snippet(text, "How long do I STEEP green teas? creme")
    assert snippet.startswith("… ") and snippet.endswith(" …")
    assert abs(len(snippet) - SNIPPET_CHARS) <= 30
    assert words(snippet, marks) == ["Green", "tea", "steep", "Steeping", "Crème"]
    body = snippet[2:-2]
    assert body in " ".join(text.split())  # whole words: the cut ends are at spaces
    i = " ".join(text.split()).index(body)
    assert text[i - 1] == " " and " ".join(text.split())[i + len(body)] == " "
    centre = (marks[0][0] + marks[-1][1]) / 2
    assert abs(centre - len(snippet) / 2) < 60  # the run sits in the middle


def test_no_match_is_the_chunk_start_and_a_short_chunk_is_whole():
    text = FILLER * 10
    snippet, marks = make_snippet(text, "zebra")
    assert marks == [] and snippet.startswith("Lorem ipsum") and snippet.endswith(" …")
    assert text.startswith(snippet[:-2])
    assert make_snippet("Cats  purr\nwhen content.", "purrs CATS") == (
        "Cats purr when content.", [[0, 4], [5, 9]])


def test_function_words_are_marked_only_when_there_is_nothing_else():
    snippet, marks = make_snippet("How often do I feed the starter? Feed it daily.", "how often do I feed the starter")
    assert words(snippet, marks) == ["often", "feed", "starter", "Feed"]
    snippet, marks = make_snippet("To be or not to be.", "to be")
    assert words(snippet, marks) == ["To", "be", "to", "be"]


def test_every_hit_gets_both_fields_on_a_copy():
    hits = [{"text": "Green tea steeps.", "score": 1.0}, {"text": "", "score": 0.5}]
    out = add_snippets(hits, "tea")
    assert out[0]["snippet"] == "Green tea steeps." and out[0]["snippet_marks"] == [[6, 9]]
    assert out[1]["snippet"] == "" and out[1]["snippet_marks"] == []
    assert "snippet" not in hits[0]  # a cached result is not changed under the next query


def test_words_of_other_languages_are_marked_by_their_stems_and_bigrams():
    """German stems (issue 31): "Häusern" marks "Häuser"; Chinese: the query's two characters are
    marked inside the run of Han characters they are written in, not the whole run."""
    snippet, marks = make_snippet("Die Häuser der Altstadt wurden aus Holz gebaut.", "Häusern Holz")
    assert [snippet[a:b] for a, b in marks] == ["Häuser", "Holz"]
    text = "北京大学是中国最早的国立综合性大学，位于北京市海淀区。"
    snippet, marks = make_snippet(text, "北京在哪里")
    assert [snippet[a:b] for a, b in marks] == ["北京", "北京"]
    snippet, marks = make_snippet(text, "北京大学")  # its bigrams 北京 京大 大学: one mark
    assert [snippet[a:b] for a, b in marks][0] == "北京大学"
