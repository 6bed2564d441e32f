"""Known-item search: is the one passage that holds a word found, under every fusion?

    .venv/bin/python benchmarks/known_item.py [--files 300] [--words 450] [--big-lines 6000]
        [--seed 7] [--model local:all-minilm-l6-v2] [--workdir DIR] [--reuse] [--extra 'top_k = 8']
        [--fusions zscore,convex,rrf,boost] [--out known_item]

The corpus (seeded): ``--files`` text files of about ``--words`` random vocabulary words each, each
holding one unique made-up token (letters and two digits, in no vocabulary) at a random place, and
one file of ``--big-lines`` lines of random words holding three more tokens (in the first, middle
and last third). The vocabulary is /usr/share/dict/words (lower-case alphabetic entries) when the
machine has it, else the lemmas of the WordNet files the search's synonyms use, else generated
syllable words; the JSON says which.

The corpus goes through ``ragweedd ingest`` (the real one-shot path, the default embedded model
unless ``--model``), then each token is searched alone, top 20, through the search the daemon
serves, once per fusion (``--extra``: more top-level config lines for the searches, e.g. a
shallower vector leg, which over a small corpus is as narrow a window as the default over a large
one). Reported per fusion: tokens missing from the top 20, tokens ranked 11-20, tokens ranked
first, and the mean rank of those found. Prints a table and writes JSON
(benchmarks/results/<out>.json).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import table, write_json  # noqa: E402

TOP = 20
FUSIONS = ("zscore", "convex", "rrf", "boost")
WORDS_PER_LINE = 10


def vocabulary(rng: random.Random) -> tuple[list[str], str]:
    """(words, where they came from)."""
    d = Path("/usr/share/dict/words")
    if d.is_file():
        words = sorted({w.strip().lower() for w in d.read_text(errors="replace").splitlines()
                        if w.strip().isalpha() and w.strip().isascii() and 3 <= len(w.strip()) <= 14})
        if len(words) > 5000:
            return words, str(d)
    wn = Path("/usr/share/wordnet")
    if (wn / "index.noun").is_file():
        words = set()
        for pos in ("noun", "verb", "adj", "adv"):
            for line in (wn / f"index.{pos}").read_text(errors="replace").splitlines():
                lemma = line.split(" ", 1)[0]
                if not line.startswith(" ") and lemma.isalpha() and lemma.isascii() and 3 <= len(lemma) <= 14:
                    words.add(lemma.lower())
        if len(words) > 5000:
            return sorted(words), f"{wn} (WordNet lemmas)"
    syll = [c + v for c in "bcdfghklmnprstvwz" for v in "aeiou"]
    words = sorted({"".join(rng.choice(syll) for _ in range(rng.randint(1, 4))) for _ in range(30000)})
    return words, "generated syllable words"


def made_up_tokens(rng: random.Random, n: int, vocab: set[str]) -> list[str]:
    """``n`` unique tokens no vocabulary word equals: consonant-vowel letters and two digits."""
    out: set[str] = set()
    while len(out) < n:
        letters = "".join(rng.choice("bdfgkmnprstvxz") + rng.choice("aeiouy") for _ in range(rng.randint(2, 4)))
        t = f"{letters}{rng.randint(10, 99)}"
        if t not in vocab and letters not in vocab:
            out.add(t)
    return sorted(out)


def make_corpus(root: Path, *, files: int, words: int, big_lines: int, seed: int) -> dict:
    rng = random.Random(seed)
    vocab, source = vocabulary(rng)
    tokens = made_up_tokens(rng, files + 3, set(vocab))
    rng.shuffle(tokens)
    root.mkdir(parents=True, exist_ok=True)
    where: dict[str, str] = {}
    for i in range(files):
        n = max(10, int(rng.gauss(words, words / 10)))
        body = [rng.choice(vocab) for _ in range(n)]
        body.insert(rng.randrange(len(body) + 1), tokens[i])
        name = f"note_{i:04d}.txt"
        lines = [" ".join(body[j:j + WORDS_PER_LINE]) for j in range(0, len(body), WORDS_PER_LINE)]
        (root / name).write_text("\n".join(lines) + "\n")
        where[tokens[i]] = name
    lines = [" ".join(rng.choice(vocab) for _ in range(WORDS_PER_LINE)) for _ in range(big_lines)]
    for k, t in enumerate(tokens[files:]):
        third = big_lines // 3
        at = rng.randrange(k * third, (k + 1) * third)
        ws = lines[at].split()
        ws.insert(rng.randrange(len(ws) + 1), t)
        lines[at] = " ".join(ws)
        where[t] = "big.txt"
    (root / "big.txt").write_text("\n".join(lines) + "\n")
    return {"vocabulary": source, "vocabulary_size": len(vocab), "tokens": where}


def _ingest(cfg: Path, env: dict) -> float:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(cfg), "ingest", "-c", "ki"],
                       env=env, cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"ingest failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return round(time.perf_counter() - t0, 1)


def measure(cfg_file: Path, fusion: str, tokens: dict[str, str], extra: str = "") -> dict:
    from ragweedd.config import load_config
    from ragweedd.embed.factory import make_embedder
    from ragweedd.services import open_oneshot

    # no semantic cache: each search is its own, never a neighbour's result
    text = cfg_file.read_text()
    cut = text.index("[embed]")
    cfg = load_config(text=text[:cut] + extra + "\n" + text[cut:],
                      env={"RAGWEED_FUSION": fusion, "RAGWEED_SEARCH_CACHE_SIZE": "0"})
    services = open_oneshot(cfg, embedder=make_embedder(cfg.embed_model, cfg))
    ranks: dict[str, int | None] = {}
    t0 = time.perf_counter()
    try:
        for token, name in tokens.items():
            res = services.search(token, ["ki"], TOP)["results"]
            ranks[token] = next((h["rank"] for h in res
                                 if Path(h["source_file"]).name == name and token in h["text"].lower()), None)
    finally:
        services.close()
    found = [r for r in ranks.values() if r is not None]
    missing = sorted(t for t, r in ranks.items() if r is None)
    return {"fusion": fusion, "tokens": len(ranks), "missing_top20": len(missing),
            "rank_11_20": sum(1 for r in found if r > 10), "rank_1": sum(1 for r in found if r == 1),
            "mean_rank_found": round(sum(found) / len(found), 3) if found else None,
            "big_file_ranks": {t: ranks[t] for t, n in tokens.items() if n == "big.txt"},
            "missing": missing, "seconds": round(time.perf_counter() - t0, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--words", type=int, default=450, help="about this many words per small file")
    ap.add_argument("--big-lines", type=int, default=6000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--model", default="local:all-minilm-l6-v2")
    ap.add_argument("--fusions", default=",".join(FUSIONS))
    ap.add_argument("--workdir", help="scratch folder (default: a new temp dir)")
    ap.add_argument("--reuse", action="store_true", help="search an already ingested --workdir again")
    ap.add_argument("--extra", default="", help="more top-level config lines for the searches, e.g. 'top_k = 8'")
    ap.add_argument("--out", default="known_item")
    a = ap.parse_args(argv)

    work = Path(a.workdir) if a.workdir else Path(tempfile.mkdtemp(prefix="ragweed-known-item-"))
    work.mkdir(parents=True, exist_ok=True)
    docs = work / "docs"
    cfg_file = work / "ragweedd.toml"
    corpus_file = work / "corpus.json"
    result: dict = {"model": a.model, "extra": a.extra, "files": a.files, "words": a.words, "big_lines": a.big_lines,
                    "seed": a.seed, "top": TOP}
    if a.reuse and corpus_file.exists() and (work / "data" / "collections" / "ki" / "rag.sqlite3").exists():
        corpus = json.loads(corpus_file.read_text())
    else:
        corpus = make_corpus(docs, files=a.files, words=a.words, big_lines=a.big_lines, seed=a.seed)
        corpus_file.write_text(json.dumps(corpus))
        cfg_file.write_text(f'data_dir = "{work / "data"}"\nstate_dir = "{work / "state"}"\n'
                            f'cache_dir = "{work / "cache"}"\n[embed]\nmodel = "{a.model}"\n'
                            f'[collections.ki]\npaths = ["{docs.resolve()}"]\n')
        result["ingest_s"] = _ingest(cfg_file, {**os.environ, "RAGWEED_LOG_LEVEL": "warning"})
    result["vocabulary"] = corpus["vocabulary"]
    result["vocabulary_size"] = corpus["vocabulary_size"]
    rows = [measure(cfg_file, f.strip(), corpus["tokens"], a.extra) for f in a.fusions.split(",") if f.strip()]
    result["runs"] = rows
    print(f"known items: {len(corpus['tokens'])} tokens in {a.files + 1} files ({corpus['vocabulary']}, "
          f"seed {a.seed}); {a.model}; top {TOP}" + (f"; extra: {a.extra!r}" if a.extra else ""))
    print(table(rows, ["fusion", "tokens", "missing_top20", "rank_11_20", "rank_1", "mean_rank_found"]))
    for r in rows:
        print(f"  {r['fusion']}: big file ranks {r['big_file_ranks']}")
    print(f"wrote {write_json(a.out, result)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
