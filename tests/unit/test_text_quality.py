"""The measure that decides whether a PDF page's text layer needs OCR (and whether OCR did better)."""

from __future__ import annotations

from ragweedd.extract.text_quality import assess, is_garbage_text  # noqa: E402

# How a 10-K's financial statement comes out of its text layer (rows on dot leaders).
STATEMENT = """61
ADOBE SYSTEMS INCORPORATED
CONSOLIDATED STATEMENTS OF COMPREHENSIVE INCOME
(In thousands)
Years Ended
November 27,
2015
November 28,
2014
Net income.......................................................................... $ 629,551 $ 268,395 $ 289,985
Other comprehensive income (loss), net of taxes:
Unrealized gains / losses on available-for-sale securities ........................... (9,226) 2,315 (2,185)
Net increase (decrease) from available-for-sale securities ...................... (12,181) (1,613) (5,198)
Foreign currency translation adjustments....................................... (123,065) (75,018) 21,558
Total other comprehensive income (loss), net of taxes ..................... $ (161,347) $ (51,503) $ (7,976)
Total comprehensive income, net of taxes ........................................ $ 468,204 $ 216,892 $ 282,009
"""

FIGURES = """Segment      2022      2021      % change
Digital Media . . . . . . . . .  $ 12,842   $ 11,520   11 %
Digital Experience . . . . . . .    4,422      3,867   14 %
Publishing and Advertising  ____    342        398  (14)%
Total    ===========  $ 17,606   $ 15,785   12 %
"""


def test_tables_on_dot_leaders_keep_their_text_layer():
    for text in (STATEMENT, FIGURES):
        q = assess(text)
        assert not is_garbage_text(text) and q.verdict == "ok", q
        assert q.unrecognised == 0 and q.bad_chars == 0


def test_missing_layers():
    for text in ("", "   \n  ", "61", "Page 4 of 10", "(a) 5 $ —"):
        assert assess(text).verdict == "missing", text


def test_unreadable_layers():
    # punctuation soup, lone non-ASCII letters (a font without ToUnicode), unmapped glyphs,
    # private-use and replacement characters, a font whose codes are shifted by three
    cases = [
        "!\"#$%&'()*+,-./0123456789:;<=>?@ ~}|{ ^]\\[ 0x1f 0x2e " * 3,
        "Ā ā Ă ă Ą ą Ć ć Ĉ ĉ Ċ ċ Č č Ď ď Đ đ 12 34 56 78 90",
        "(cid:12)(cid:5) (cid:7)(cid:8) (cid:3) the (cid:44)(cid:2) and (cid:9) (cid:10) (cid:11) (cid:13)",
        "\ue001\ue002\ue003 \ue004\ue005 revenue \ufffd\ufffd\ufffd \ue010\ue011\ue012 \ue020 grew \ue021\ue022",
        "7KH FRPSDQ\\ UHSRUWV VWURQJ JURZWK LQ WKLV TXDUWHU DQG WKH QHZ SURGXFWV ZHUH ZHOO UHFHLYHG",
    ]
    for text in cases:
        q = assess(text)
        assert q.verdict == "unreadable" and q.score == 0, (text, q)


def test_other_scripts_and_identifiers_are_readable():
    for text in ("中文文本是可以读的。这是一页。第二句话在这里。",
                 "Die Übersicht über das Geschäftsjahr zeigt höhere Umsätze in Europa.",
                 "See Form 10-K, Item 7A; COVID-19 costs; S&P 500; www.adobe.com; ir@adobe.com; Q2 FY23."):
        assert assess(text).verdict == "ok", text


def test_score_prefers_the_reading_with_more_recognisable_text():
    layer, ocr = assess("Figure 3"), assess("Figure 3")
    assert layer.score == ocr.score  # a tie keeps the text layer
    assert assess("Invoice number 4471 payable to the harbour master").score > assess("Copy").score
    assert assess("~}|{ ^]\\[ #$%&' ~~ ||").score < assess("Copy").score
