"""A word searched for before any file holds it must not stay hidden once a file brings it."""

from ragweedd.config import load_config
from ragweedd.embed.hashing import HashEmbedder
from ragweedd.ingest.pipeline import Pipeline
from ragweedd.paths import Paths
from ragweedd.query.filters import Filters
from ragweedd.store.backends import open_data_dir
from tests.query_support import open_searcher


def test_word_searched_before_it_exists_is_found_after_ingest(tmp_path):
    cfg = load_config(text="[embed]\nmodel = 'hash:64'\n", env={})
    paths = Paths.resolve(str(tmp_path / "d"), str(tmp_path / "s"), str(tmp_path / "c"))
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(30):
        (docs / f"n{i}.txt").write_text(f"Ordinary note number {i} about gardening and the weather.")
    pipe = Pipeline(cfg, paths, HashEmbedder(64), stores=open_data_dir(paths))
    for f in sorted(docs.iterdir()):
        pipe.ingest_file("c", f, docs)
    # first search: the word is in no chunk yet (df = 0)
    with open_searcher(cfg, paths, HashEmbedder(64)) as s:
        res = s.search("xylophonist", filters=Filters.make(), limit=5, mode="keyword")
        assert res["results"] == []
    new = docs / "new.txt"
    new.write_text("The xylophonist rehearsed the concerto all afternoon.")
    pipe.ingest_file("c", new, docs)
    pipe.close()
    # a fresh searcher (a daemon restart, or another process) must see the new file
    with open_searcher(cfg, paths, HashEmbedder(64)) as s:
        res = s.search("xylophonist", filters=Filters.make(), limit=5, mode="keyword")
        assert [h["source_file"] for h in res["results"]] == [str(new)]
        res = s.search("xylophonist", filters=Filters.make(path_glob="*/n1.txt"), limit=5, mode="hybrid")
        assert all(h["source_file"].endswith("/n1.txt") for h in res["results"])
