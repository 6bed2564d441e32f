"""Which passages an answer without an LLM lists as sources: the keep ratio, measured.

    python benchmarks/quotes_threshold.py [--queries 200] [--pool 2000] [--seed 7]

Two labelled sets:

- **examples**: the seven files of examples/ as passages (one passage each) and hand-written
  questions, each with the one file that answers it (``EXAMPLE_QUESTIONS``, shared with the tests);
- **SciFact** (train split, ``RAGWEED_SCIFACT`` or /work/shared/eval/scifact): a sample of claims,
  the ten nearest abstracts by the real embedder among the judged abstracts of the sample plus a
  random pool of others; an abstract is relevant when the qrels judge it so.

For every keep ratio r, a passage is listed when its best sentence scores at least r x the best
passage's. Reported: micro precision and recall of the listed passages against the relevant ones
among those retrieved, and sources listed per question; the last row is today's rule (the first
five passages by retrieval).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import SCIFACT, table, write_json  # noqa: E402
from ragweedd.answer import quotes as Q  # noqa: E402

WEIGHTS = (0.0, 0.5, 0.7, 0.85, 1.0)
RATIOS = (0.0, 0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8, 0.9)
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# question -> the example file that answers it (the others do not)
EXAMPLE_QUESTIONS = {
    "how often do I feed the starter?": "sourdough.txt",
    "what temperature should the sourdough starter be kept at?": "sourdough.txt",
    "what is the grey liquid on top of my starter?": "sourdough.txt",
    "what does the ef parameter trade off?": "hnsw-notes.md",
    "what happens to deleted vectors in the graph?": "hnsw-notes.md",
    "how many neighbours does layer zero hold?": "hnsw-notes.md",
    "when is the fog horn tested?": "lighthouse.svg",
    "when is the lamp lit?": "lighthouse.svg",
    "when was the chain replaced?": "bike-service.json",
    "which planet is the largest?": "solar-system.html",
    "how long should sencha steep?": "tea-inventory.csv",
    "how do I publish a release?": "release-process.rst",
}

# the harder set: every paragraph of the examples is a passage, so the others of the same document
# (same topic, same words) compete; question -> words found only in the paragraphs that answer it
PARAGRAPH_QUESTIONS = {
    "how often do I feed the starter?": ["Feed the starter once a day"],
    "what temperature should the starter be kept at?": ["Keep it at room temperature"],
    "how much does a healthy starter rise?": ["doubles in four to six hours"],
    "what is the grey liquid on top of the starter?": ["hooch"],
    "which flour makes a more active starter?": ["Rye flour"],
    "when should I bake?": ["Bake when the starter"],
    "what does ef trade off?": ["beam width"],
    "what happens to deleted vectors?": ["tombstones"],
    "how many neighbours does layer zero hold?": ["layer zero"],
    "when is the fog horn tested?": ["fog horn"],
    "when was the chain replaced?": ["replaced chain"],
    "which planet is the largest?": ["Jupiter"],
    "how fast are the winds on Neptune?": ["Neptune"],
    "how long should sencha steep?": ["Sencha"],
    "when is a release tagged?": ["tagged from the main branch"],
    "what bumps the major version number?": ["semantic versioning"],
    "how is a bad release rolled back?": ["rolled back"],
    "can I downgrade across a database migration?": ["rolled back"],
}


def example_paragraphs() -> list[dict]:
    """The blank-line paragraphs of the examples' extracted text (as ingest sees them), with their
    spans; a heading alone is not a passage."""
    import re

    from ragweedd.extract.registry import extract_file

    out = []
    for p in sorted(EXAMPLES.iterdir()):
        text = extract_file(p).text
        for m in re.finditer(r"\S(?:.*?\S)?(?=\n\s*\n|\s*$)", text, re.S):
            body = m.group(0)
            if len(body.split()) < 4:
                continue
            out.append({"text": body, "filename": p.name, "doc_id": p.name, "span": [m.start(), m.end()],
                        "lines": [text.count("\n", 0, m.start()) + 1, text.count("\n", 0, m.end()) + 1],
                        "uri": p.as_uri()})
    return out


def example_passages() -> list[dict]:
    out = []
    for p in sorted(EXAMPLES.iterdir()):
        text = p.read_text(encoding="utf-8").strip()
        out.append({"text": text, "filename": p.name, "doc_id": p.name, "span": [0, len(text)],
                    "lines": [1, text.count("\n") + 1], "uri": p.as_uri()})
    return out


def passage_scores(cands: list, n: int, weight: float) -> list[float]:
    """Each passage's best sentence under another semantic weight (the candidates keep both parts)."""
    best = [0.0] * n
    for c in cands:
        best[c.hit] = max(best[c.hit], weight * c.sim + (1 - weight) * c.keyword)
    return best


def weight_grid(raw: list[tuple[list, int, list[bool]]]) -> list[dict]:
    """Precision / recall / first-listed-is-relevant for several semantic weights at several ratios."""
    rows = []
    for w in WEIGHTS:
        runs = [(passage_scores(cands, n, w), labels) for cands, n, labels, *_ in raw]
        for row in evaluate(runs)[:-1]:
            if row["rule"] in ("ratio 0.5", "ratio 0.6", "ratio 0.7", "ratio 0.8"):
                rows.append({"weight": w, **row})
    return rows


def evaluate(runs: list[tuple[list[float], list[bool]]]) -> list[dict]:
    """``runs``: per question, each retrieved passage's score and whether it is relevant."""
    rows = []
    for r in RATIOS:
        tp = listed = rel = 0
        for scores, labels in runs:
            keep = set(Q.kept(scores, r)[:5])
            tp += sum(1 for i in keep if labels[i])
            listed += len(keep)
            rel += sum(labels)
        rows.append({"rule": f"ratio {r}", "precision": tp / max(listed, 1), "recall": tp / max(rel, 1),
                     "listed_per_q": listed / max(len(runs), 1),
                     "p_at_1": sum(labels[max(range(len(sc)), key=lambda i: sc[i])] for sc, labels in runs)
                     / max(len(runs), 1)})
    tp = listed = rel = 0
    for _, labels in runs:
        tp += sum(labels[:5])
        listed += min(5, len(labels))
        rel += sum(labels)
    rows.append({"rule": "first five (before)", "precision": tp / max(listed, 1), "recall": tp / max(rel, 1),
                 "listed_per_q": listed / max(len(runs), 1),
                 "p_at_1": sum(labels[0] for _, labels in runs) / max(len(runs), 1)})
    return rows


FLOORS = (0.0, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)


def floor_table(answerable: list[float], unanswerable: list[float]) -> list[dict]:
    """For each absolute floor: the share of answerable questions (the answer among the passages)
    whose best passage scores at or above it (answered), and of unanswerable ones (every passage
    that answers taken out) whose best scores below it (told that nothing answers)."""
    return [{"floor": f, "answered": sum(s >= f for s in answerable) / max(len(answerable), 1),
             "unanswerable_told": sum(s < f for s in unanswerable) / max(len(unanswerable), 1),
             "n": f"{len(answerable)}/{len(unanswerable)}"} for f in FLOORS]


def best_without(query: str, hits: list[dict], labels: list[bool], emb) -> float | None:
    """The best passage score once the passages that answer are gone (None: nothing left)."""
    rest = [h for h, ok in zip(hits, labels) if not ok]
    if not rest or len(rest) == len(hits):
        return None
    scores, _ = Q.rank_passages(query, rest, emb)
    return max(scores, default=0.0)


def run_examples(emb, paragraphs: bool = False) -> tuple[list[dict], list]:
    from ragweedd.embed.long import embed_texts

    passages = example_paragraphs() if paragraphs else example_passages()
    pvecs = embed_texts(emb, [p["text"] for p in passages])
    runs, raw = [], []
    questions = PARAGRAPH_QUESTIONS if paragraphs else EXAMPLE_QUESTIONS
    for q, answer in questions.items():
        # in the order dense retrieval gives them, so "first five" is what the answer listed before
        sims = pvecs @ embed_texts(emb, [q.lower()])[0]
        ranked = [passages[i] for i in sorted(range(len(passages)), key=lambda i: -sims[i])]
        scores, cands = Q.rank_passages(q, ranked, emb)
        labels = ([any(w in p["text"] for w in answer) for p in ranked] if paragraphs
                  else [p["filename"] == answer for p in ranked])
        runs.append((scores, labels))
        raw.append((cands, len(ranked), labels, max(scores, default=0.0), best_without(q, ranked, labels, emb)))
    return evaluate(runs), raw


def run_scifact(emb, n_queries: int, pool: int, seed: int) -> tuple[list[dict], list]:
    import numpy as np

    from ragweedd.embed.long import embed_texts

    corpus = {}
    with open(SCIFACT / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            corpus[d["_id"]] = d
    queries = {}
    with open(SCIFACT / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            queries[d["_id"]] = d["text"]
    qrels: dict[str, set[str]] = {}
    for line in (SCIFACT / "qrels" / "train.tsv").read_text().splitlines()[1:]:
        qid, did, s = line.strip("\r").split("\t")
        if int(s) > 0:
            qrels.setdefault(qid, set()).add(did)
    rng = random.Random(seed)
    qids = rng.sample(sorted(qrels), min(n_queries, len(qrels)))
    judged = {d for q in qids for d in qrels[q]}
    others = rng.sample(sorted(set(corpus) - judged), min(pool, len(corpus) - len(judged)))
    ids = sorted(judged) + others
    texts = [corpus[d]["text"] for d in ids]
    t0 = time.perf_counter()
    dvecs = embed_texts(emb, texts)
    qvecs = embed_texts(emb, [queries[q].lower() for q in qids])
    print(f"embedded {len(ids)} abstracts and {len(qids)} claims in {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    runs, raw = [], []
    t0 = time.perf_counter()
    for k, qid in enumerate(qids):
        top = np.argsort(-(dvecs @ qvecs[k]))[:10]
        hits = [{"text": texts[i], "doc_id": ids[i], "span": [0, len(texts[i])]} for i in top]
        scores, cands = Q.rank_passages(queries[qid], hits, emb)
        labels = [ids[i] in qrels[qid] for i in top]
        runs.append((scores, labels))
        # unanswerable: the same claim over the ten nearest abstracts that are not judged relevant
        rest = [i for i in np.argsort(-(dvecs @ qvecs[k])) if ids[i] not in qrels[qid]][:10]
        rest_hits = [{"text": texts[i], "doc_id": ids[i], "span": [0, len(texts[i])]} for i in rest]
        without = max(Q.rank_passages(queries[qid], rest_hits, emb)[0], default=0.0)
        raw.append((cands, len(hits), labels, max(scores, default=0.0) if any(labels) else None, without))
    print(f"scored {len(qids)} answers in {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    return evaluate(runs), raw


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--pool", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--no-scifact", action="store_true")
    a = ap.parse_args()
    from ragweedd.embed.local import MiniLMEmbedder

    emb = MiniLMEmbedder(threads=2).load()
    cols = ["rule", "precision", "recall", "listed_per_q", "p_at_1"]
    grid_cols = ["weight", "rule", "precision", "recall", "listed_per_q", "p_at_1"]
    ex, raw_ex = run_examples(emb)
    print(f"examples ({len(EXAMPLE_QUESTIONS)} questions, 7 passages each)\n" + table(ex, cols) + "\n")
    ex_grid = weight_grid(raw_ex)
    print("examples, by semantic weight\n" + table(ex_grid, grid_cols) + "\n")
    para, raw = run_examples(emb, paragraphs=True)
    n_para = len(example_paragraphs())
    print(f"example paragraphs ({len(PARAGRAPH_QUESTIONS)} questions, {n_para} passages each)\n"
          + table(para, cols) + "\n")
    para_grid = weight_grid(raw)
    print("example paragraphs, by semantic weight\n" + table(para_grid, grid_cols) + "\n")
    floor_cols = ["floor", "answered", "unanswerable_told", "n"]
    ex_floor = floor_table([r[3] for r in raw_ex if r[3] is not None], [r[4] for r in raw_ex if r[4] is not None])
    print("examples, absolute floor\n" + table(ex_floor, floor_cols) + "\n")
    para_floor = floor_table([r[3] for r in raw if r[3] is not None], [r[4] for r in raw if r[4] is not None])
    print("example paragraphs, absolute floor\n" + table(para_floor, floor_cols) + "\n")
    payload = {"examples": ex, "examples_grid": ex_grid, "paragraphs": para, "paragraphs_grid": para_grid,
               "examples_floor": ex_floor, "paragraphs_floor": para_floor, "sem_weight": Q.SEM_WEIGHT}
    if not a.no_scifact and (SCIFACT / "corpus.jsonl").exists():
        sf, raw = run_scifact(emb, a.queries, a.pool, a.seed)
        print(f"SciFact train ({a.queries} claims, top 10 of {a.pool} + judged abstracts)\n" + table(sf, cols) + "\n")
        sf_grid = weight_grid(raw)
        print("SciFact, by semantic weight\n" + table(sf_grid, grid_cols) + "\n")
        sf_floor = floor_table([r[3] for r in raw if r[3] is not None], [r[4] for r in raw if r[4] is not None])
        print("SciFact, absolute floor\n" + table(sf_floor, floor_cols))
        payload.update(scifact=sf, scifact_grid=sf_grid, scifact_floor=sf_floor, queries=a.queries, pool=a.pool,
                       seed=a.seed)
    write_json("quotes_threshold", payload)


if __name__ == "__main__":
    main()
