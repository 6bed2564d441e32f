"""ragweedctl's terminal text: a hit's place names its subfolder, and daemon text cannot drive the
terminal."""

from __future__ import annotations

from ragweedd.cli.ctl_text import _where, safe


def test_a_hit_is_named_by_its_path_under_the_collection_root():
    a = {"collection": "docs", "filename": "n45.md", "source_rel_path": "big/n45.md", "lines": [3, 9]}
    b = {**a, "source_rel_path": "small/n45.md"}
    assert _where(a) == "docs/big/n45.md  lines 3-9"
    assert _where(b) == "docs/small/n45.md  lines 3-9"
    # an older daemon's hit without the relative path still names the file
    assert _where({"collection": "docs", "filename": "n45.md", "page_label": "4"}) == "docs/n45.md  p. 4"


def test_a_crafted_path_is_printed_escaped():
    hit = {"collection": "docs", "source_rel_path": "evil\x1b]0;pwned\x07.md"}
    assert _where(hit) == "docs/evil\\x1b]0;pwned\\x07.md" and "\x1b" not in safe("\x1b[2J")
