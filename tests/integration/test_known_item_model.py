"""Known-item search with the real embedded model: the one chunk holding a made-up token (an
identifier, a code, a name) is found under the default fusion, in a corpus of random words where
the vector leg's window is narrow and a long file's other chunks compete for its places."""

from pathlib import Path

import pytest

from benchmarks.known_item import make_corpus  # noqa: E402
from ragweedd.config import load_config  # noqa: E402
from ragweedd.services import open_oneshot  # noqa: E402

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def minilm():
    from ragweedd.embed.local import MiniLMEmbedder

    return MiniLMEmbedder(threads=2).load()


@pytest.fixture(scope="module")
def engine(tmp_path_factory, minilm):
    tmp = tmp_path_factory.mktemp("known-item")
    root = tmp / "docs"
    # 20 files of 450 random words and a 1,500-line one: 281 chunks, 23 tokens
    corpus = make_corpus(root, files=20, words=450, big_lines=1500, seed=7)
    # The vector leg 8 deep over 281 chunks is as narrow a window as the default 64 over
    # thousands of chunks (where the default fusion lost 19 of 303 such tokens): before known
    # items, this corpus lost one token of the long file and ranked three others 3rd to 9th.
    cfg = load_config(text=f'data_dir = "{tmp}/data"\nstate_dir = "{tmp}/state"\ncache_dir = "{tmp}/cache"\n'
                           "search_cache_size = 0\ntop_k = 8\n", env={})
    assert cfg.fusion == "zscore" and cfg.max_chunks_per_file == 3  # the defaults this is about
    svc = open_oneshot(cfg, embedder=minilm)
    pipe = svc.pipeline(extract=None)
    for p in sorted(root.iterdir()):
        assert pipe.ingest_file("ki", p, root).status == "indexed"
    yield svc, corpus["tokens"]
    pipe.close()
    svc.close()


def _rank(svc, token: str, name: str, limit: int = 10, query: str | None = None) -> int | None:
    """Rank of the chunk of ``name`` holding ``token`` when searching ``query`` (default: the token)."""
    res = svc.search(query or token, ["ki"], limit)
    return next((h["rank"] for h in res["results"]
                 if Path(h["source_file"]).name == name and token in h["text"].lower()), None)


def test_every_token_is_found_first(engine):
    svc, tokens = engine
    ranks = {t: _rank(svc, t, name) for t, name in tokens.items()}
    assert {t: r for t, r in ranks.items() if r != 1} == {}


def test_a_token_in_a_long_file_is_found_among_other_words_of_its_passage(engine):
    """Words the long file's other chunks hold too fill the keyword leg's window and compete for
    the file's places: the chunk with the token still comes back."""
    svc, tokens = engine
    big = [t for t, name in tokens.items() if name == "big.txt"]
    res = svc.search(big[0], ["ki"], 10)
    text = next(h["text"] for h in res["results"] if big[0] in h["text"].lower())
    common = [w for w in text.lower().split() if w != big[0]][:3]
    query = " ".join(common[:2] + [big[0]] + common[2:])
    assert _rank(svc, big[0], "big.txt", query=query) is not None, query
