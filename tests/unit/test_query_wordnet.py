"""WordNet lookups by binary search in the real dictionary files of Debian's wordnet-base."""

from pathlib import Path

import pytest

from ragweedd.config import load_config  # noqa: E402
from ragweedd.query.wordnet import WordNet, _SortedFile, open_wordnet, wordnet_status  # noqa: E402
from tests.query_support import require_wordnet  # noqa: E402


@pytest.fixture(scope="module")
def wn():
    w = WordNet(require_wordnet())
    yield w
    w.close()


def test_binary_search_agrees_with_a_linear_scan(wn):
    d = Path(require_wordnet())
    f = _SortedFile(d / "index.adv")
    lemmas = [line.split(b" ", 1)[0].decode() for line in (d / "index.adv").read_bytes().splitlines()
              if line and not line.startswith(b" ")]
    assert len(lemmas) > 3000
    for lemma in lemmas[:50] + lemmas[-50:] + lemmas[::97]:
        line = f.find(lemma)
        assert line is not None and line.split(b" ", 1)[0].decode() == lemma
    for missing in ["", "aaaaaa", "zzzzzz", "quickl", "quicklyy", "  1 This"]:
        assert f.find(missing) is None
    f.close()


def test_first_synset_and_morphology(wn):
    assert wn.first_synset("quickly") == ("adv", "quickly", ("quickly", "rapidly", "speedily", "chop-chop", "apace"))
    assert wn.synonyms("quickly") == ("rapidly", "speedily", "chop-chop", "apace")
    assert wn.first_synset("mice")[1] == "mouse"  # noun.exc
    assert wn.first_synset("absorbed")[:2] == ("verb", "absorb")  # -ed rule
    assert wn.synonyms("aardvark") == ("ant bear", "anteater", "orycteropus afer")  # multi-word -> spaces
    assert wn.synonyms("Heart") == ("bosom",)
    assert wn.synonyms("zzzqqq") == ()
    assert wn.synonyms("") == ()


def test_status_and_open(tmp_path):
    require_wordnet()
    on = load_config(text="", env={})
    assert wordnet_status(on) == {"enabled": True, "dir": "/usr/share/wordnet"}
    assert open_wordnet(on) is not None
    off = load_config(text="synonyms_enabled = false", env={})
    assert wordnet_status(off)["enabled"] is False and open_wordnet(off) is None
    (tmp_path / "index.noun").write_text("")
    missing = load_config(text=f'wordnet_dir = "{tmp_path}"', env={})
    st = wordnet_status(missing)
    assert st["enabled"] is False and "data.noun" in st["reason"] and open_wordnet(missing) is None
