"""The uri of a hit opens its place: a PDF page, a time, lines of a text file, an archive member."""

from __future__ import annotations

from ragweedd.contract import place_uri
from ragweedd.store.sqlite.rag_db import hit_fields


def test_line_anchors_are_githubs():
    assert place_uri("/d/notes.md", lines=[12, 20]) == "file:///d/notes.md#L12-L20"
    assert place_uri("/d/notes.md", lines=[12, 12]) == "file:///d/notes.md#L12"
    assert place_uri("/d/my notes.md", lines=[3, 4]) == "file:///d/my%20notes.md#L3-L4"
    assert place_uri("/d/notes.md", lines=None) == "file:///d/notes.md"


def test_a_member_keeps_its_lines_after_its_path():
    assert place_uri("/d/a.zip", member="log/x.md", lines=[3, 9]) == "file:///d/a.zip#member=log/x.md&L3-L9"
    assert place_uri("/d/a.zip", member="a b.md", lines=[5, 5]) == "file:///d/a.zip#member=a%20b.md&L5"
    assert place_uri("/d/a.zip", member="x.pdf") == "file:///d/a.zip#member=x.pdf"


def test_page_and_time_win_over_lines():
    assert place_uri("/d/x.pdf", pages=[3, 4], lines=[1, 2]) == "file:///d/x.pdf#page=3"
    assert place_uri("/d/r.mp3", t_start=12.5, t_end=20.0, lines=[1, 2]) == "file:///d/r.mp3#t=12.5,20"


def test_hit_fields_expose_lines_and_anchor_the_uri():
    meta = {"source_file_name": "/d/notes.md", "char_start": 10, "char_end": 90, "line_start": 2,
            "line_end": 7, "chroma:document": "text"}
    h = hit_fields(meta)
    assert h["lines"] == [2, 7] and h["uri"] == "file:///d/notes.md#L2-L7" and h["span"] == [10, 90]
    # a chunk indexed before lines were stored: no anchor until the file is indexed again
    old = hit_fields({k: v for k, v in meta.items() if not k.startswith("line_")})
    assert old["lines"] is None and old["uri"] == "file:///d/notes.md"
