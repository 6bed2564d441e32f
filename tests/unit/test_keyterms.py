"""The index form of text in any language (ragweedd/keyterms.py, issue 31): what a chunk and a
query become before the keyword index sees them."""

import random
import sqlite3

from ragweedd import keyterms


def sqlite_porter(text: str) -> list[str]:
    """What FTS5's porter unicode61 (the keyword index before issue 31) made of ``text``."""
    c = sqlite3.connect(":memory:")
    c.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61')")
    c.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    c.execute("INSERT INTO t(rowid, x) VALUES (1, ?)", (text,))
    return [r[0] for r in c.execute("SELECT term FROM v ORDER BY offset")]


def test_english_is_what_porter_unicode61_made_of_it():
    words = ("cells running runs ran the of connection connected generalizations oscillators relational "
             "rational hopeful goodness formative electrical café naïve Zürich résumé IL-6 5G FY2015 "
             "mitochondria oxidative phosphorylation agreed feed happy sky dying lying caresses ponies "
             "a is as it s an digitizer conformabli radicalli differentli vileli analogousli").split()
    rng = random.Random(5)
    text = " ".join(rng.choice(words) for _ in range(400))
    assert keyterms.terms(text, "en") == sqlite_porter(text)


def test_other_languages_are_stemmed_and_folded_in_their_own_way():
    assert keyterms.terms("Die Häuser, das Haus", "de") == ["die", "haus", "das", "haus"]
    assert keyterms.terms("canciones Canción", "es") == ["cancion", "cancion"]
    assert keyterms.terms("книгами книга", "ru") == ["книг", "книг"]
    assert keyterms.terms("المكتبات", "ar") == ["مكتب"]
    # Devanagari vowel signs are marks: part of the word, not separators
    assert keyterms.terms("लड़कों हिन्दी", "hi") == ["लड़क", "हिन्द"]
    # a language without a Snowball stemmer: folded and lower-cased only
    assert keyterms.terms("Tiếng Việt", "vi") == ["tieng", "viet"]


def test_scripts_without_spaces_become_character_bigrams():
    assert keyterms.terms("北京大学", "zh") == ["北京", "京大", "大学"]
    assert keyterms.terms("東京タワー", "ja") == ["東京", "京タ", "タワ", "ワー"]
    assert keyterms.terms("水", "zh") == ["水"]
    assert keyterms.terms("iPhone手机", "zh") == ["iphone", "手机"]  # Latin and Han apart
    assert keyterms.terms("ภาษาไทย", "th")[:2] == ["ภา", "าษ"]
    # a query's two-character word is a term of every text that holds it
    assert "北京" in keyterms.terms("北京大学是中国最早的大学", "zh")


def test_digits_of_every_script_and_full_width_forms_are_one():
    assert keyterms.terms("٢٠١٥ २०१५ ２０１５ 2015", "") == ["2015"] * 4
    assert keyterms.terms("ＡＢＣ", "") == ["abc"]


def test_a_query_is_read_in_the_collections_language():
    assert keyterms.detect("Wie viele Einwohner hat Berlin?") == "de"
    assert keyterms.detect("Python") != "en"  # one word alone says little...
    assert keyterms.detect("Python", {"en": 5000, "la": 3}) == "en"  # ...the collection does
    assert keyterms.detect("Wie viele Einwohner hat Berlin?", {"en": 5000, "de": 30}) == "de"
    assert keyterms.detect("2015", {"de": 3, "en": 9}) == "en"  # no letters: the main language
    assert keyterms.detect("") == ""


def test_a_document_has_one_language_whatever_its_short_chunks_look_like():
    chunks = ["Inhalt", "Tabelle 3"] + ["Die Häuser der Altstadt wurden im Mittelalter aus Holz gebaut."] * 5
    assert keyterms.detect_document(chunks) == "de"


def test_embedder_languages():
    assert keyterms.parse_languages("*") is None and keyterms.parse_languages("") is None
    assert keyterms.parse_languages("en, DE;fr") == frozenset({"en", "de", "fr"})
    assert keyterms.covered("de", None) and keyterms.covered("", frozenset({"en"}))
    assert not keyterms.covered("de", frozenset({"en"}))


def test_a_run_too_long_to_be_a_word_is_cut_not_stemmed():
    blob = "a" * 5000
    assert keyterms.terms(f"key {blob} end", "en") == ["kei", "a" * 200, "end"]
