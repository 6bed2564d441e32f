"""Human output people can read (issue 24, point 5), the same in ``ragweedd`` and ``ragweedctl``:
no character offsets (``--json`` keeps them), results and sources best first with a strong /
partial / weak label instead of raw scores, the place in words (page, section, lines, sheet and
rows, time), the snippet with the query's words in bold on a terminal and plain otherwise."""

from __future__ import annotations

import io
import re

import pytest

from ragweedd.cli.ask import print_sources
from ragweedd.cli.ctl_text import (
    BOLD,
    NORMAL,
    SafeWriter,
    _print_sources,
    marked_snippet,
    place,
    print_citation_checks,
    print_hit_list,
    strength,
    use_color,
)

HITS = [
    # listed worst first, as a source list of an answer may be: the output orders them by score
    {"collection": "docs", "filename": "10k.pdf", "source_file": "/d/10k.pdf", "uri": "file:///d/10k.pdf#page=7",
     "page_label": "7", "section": "Liquidity", "span": [196712, 197700], "score": -1.653, "rel_score": 0.0,
     "text": "x", "snippet": "cash flows from operations", "snippet_marks": [[0, 4]], "n": 3},
    {"collection": "docs", "filename": "book.xlsx", "source_file": "/d/book.xlsx", "uri": "file:///d/book.xlsx",
     "sheet": "Revenue", "rows": [2, 40], "span": [0, 900], "score": 0.2, "rel_score": 0.5, "text": "y", "n": 2,
     "snippet": "revenue by quarter", "snippet_marks": [[0, 7]]},
    {"collection": "docs", "filename": "talk.mp3", "source_file": "/d/talk.mp3", "uri": "file:///d/talk.mp3#t=62",
     "t_start": 62.0, "t_end": 90.5, "span": [10, 400], "score": 1.056, "rel_score": 1.0, "text": "z", "n": 1,
     "snippet": "… the cash position improved …", "snippet_marks": [[6, 10]]},
]


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_search_results_best_first_labelled_without_offsets_or_raw_scores():
    out = io.StringIO()
    print_hit_list([dict(h) for h in HITS], out, color=False)
    text = out.getvalue()
    assert "chars" not in text and "196712" not in text and "-1.653" not in text and "1.056" not in text
    heads = [ln for ln in text.splitlines() if ln.startswith("[")]
    assert heads == ["[1] strong  docs/talk.mp3  1:02-1:30",
                     "[2] partial docs/book.xlsx  sheet Revenue, rows 2-40",
                     "[3] weak    docs/10k.pdf  p. 7, § Liquidity"], text
    assert "\x1b" not in text and "    cash flows from operations\n" in text


def test_answer_sources_best_first_keep_their_numbers():
    out = io.StringIO()
    print_sources({"mode": "quotes", "sources": [dict(h) for h in HITS]}, out)
    heads = [ln for ln in out.getvalue().splitlines() if ln.startswith("[")]
    assert heads == ["[1] strong  docs/talk.mp3  1:02-1:30", "[2] partial docs/book.xlsx  sheet Revenue, rows 2-40",
                     "[3] weak    docs/10k.pdf  p. 7, § Liquidity"]
    # ragweedctl's list (history, ask) as well; without "n" the position in the list numbers them
    out = io.StringIO()
    _print_sources([{k: v for k, v in h.items() if k != "n"} for h in HITS], out)
    heads = [ln for ln in out.getvalue().splitlines() if ln.startswith("[")]
    assert [h.split()[0] for h in heads] == ["[3]", "[2]", "[1]"] and "chars" not in out.getvalue()


def test_citation_check_names_no_character_offsets():
    out = io.StringIO()
    print_citation_checks({"citations_verified": {"method": "terms"}, "citation_checks": [
        {"n": 1, "supported": False, "claim": "Cats purr at 25 Hz.", "missing": ["25"],
         "source_sentence": {"text": "Cats purr when content.", "span": [12, 35]}}]}, out)
    assert "closest in [1]: Cats purr when content." in out.getvalue() and "chars" not in out.getvalue()


def test_strength_thresholds():
    assert [strength({"score": 1.0, "rel_score": r}) for r in (1.0, 0.67, 0.66, 0.33, 0.32, 0.0)] == \
        ["strong", "strong", "partial", "partial", "weak", "weak"]
    assert strength({"score": None, "rel_score": 1.0}) is None  # a tree-mode source: chosen, not scored


def test_place_in_words():
    assert place({"lines": [4, 4]}) == "line 4"
    assert place({"member": "a/b.txt", "lines": [1, 9]}) == "in a/b.txt, lines 1-9"
    assert place({"t_start": 3725.0, "t_end": 3790.0, "lines": [1, 2]}) == "1:02:05-1:03:10"
    assert place({"span": [5, 900]}) == ""  # the file itself: its offsets are for --json


def test_snippet_marks_bold_on_a_terminal_plain_elsewhere(monkeypatch):
    h = {"snippet": "green tea should steep", "snippet_marks": [[0, 5], [17, 22]]}
    assert marked_snippet(h, True) == f"{BOLD}green{NORMAL} tea should {BOLD}steep{NORMAL}"
    assert marked_snippet(h, False) == "green tea should steep"
    # a control character in the text is escaped, the marks still fall on their words
    h = {"snippet": "a\x1b[2Jb tea", "snippet_marks": [[7, 10], [99, 120], ["x"]]}
    assert marked_snippet(h, True) == f"a\\x1b[2Jb {BOLD}tea{NORMAL}"
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert use_color(Tty()) and not use_color(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color(Tty())


def test_ragweedctl_writer_lets_the_bold_through_and_nothing_else():
    raw = Tty()
    hit = dict(HITS[2], collection="docs\x1b]0;x\x07")
    print_hit_list([hit], SafeWriter(raw), color=True)
    text = raw.getvalue()
    assert f"… the {BOLD}cash{NORMAL} position improved …" in text
    assert re.sub(r"\x1b\[(1|22)m", "", text).count("\x1b") == 0  # the crafted name is escaped


@pytest.mark.parametrize("no_color", [None, "1"])
def test_one_shot_search_output(monkeypatch, capsys, no_color):
    """``ragweedd search`` prints through the same function (stdout not a terminal here: no bold)."""
    from ragweedd.cli.common import print_hits

    if no_color:
        monkeypatch.setenv("NO_COLOR", no_color)
    print_hits([dict(h) for h in HITS], as_json=False)
    text = capsys.readouterr().out
    assert text.startswith("[1] strong  docs/talk.mp3") and "\x1b" not in text and "chars" not in text
    print_hits([dict(h) for h in HITS], as_json=True)
    assert '"span": [196712, 197700]' in capsys.readouterr().out  # programs keep the offsets
