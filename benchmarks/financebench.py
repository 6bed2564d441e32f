"""FinanceBench dev through ragweedd: ingest the 44 filings, then document and page hit@k of the 78
questions (``ragweedd eval questions``), beside a plain BM25 over the filings' pages.

    .venv/bin/python benchmarks/financebench.py [--data ../shared/eval/financebench]
        [--model local:all-minilm-l6-v2] [--workdir DIR] [--reuse] [--out financebench]

1. ``ragweedd ingest`` (the real one-shot path: sandboxed extraction, chunking, embedding, index
   files) of ``docs/`` into a scratch data dir (``--workdir``, default under /tmp; ``--reuse`` keeps
   an existing one and skips this step), timed: files/s, pages/s, chunks/s.
2. The questions through the search the daemon serves, in the hybrid, keyword and dense modes;
   then the answer without an LLM: its numbered sources judged like hits (is its first source the
   right filing, is one of them an evidence page), and the figure questions' column.
3. The baseline the retrieval targets are set against: bm25s with an English stemmer (PyStemmer)
   over every page of every filing (page text from poppler's ``pdftotext``), every query word kept;
   a page hit is the evidence page itself, a document hit any page of the filing.

Needs the bench extra (``pip install -e '.[bench]'``: bm25s, PyStemmer) and poppler-utils. Prints a
table and writes JSON (benchmarks/results/<out>.json). The data is read in place, never copied.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import table, write_json  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "eval" / "financebench"


def _ingest(cfg: Path, env: dict) -> dict:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(cfg), "ingest", "-c", "fb"],
                       env=env, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"ingest failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return {"seconds": round(seconds, 1), "stdout": r.stdout.strip().splitlines()[-3:]}


def _counts(data_dir: Path) -> dict:
    import sqlite3

    c = sqlite3.connect(f"file:{data_dir / 'ingest_db.sqlite3'}?mode=ro", uri=True)
    try:
        states = dict(c.execute("SELECT extract_status, count(*) FROM ingest_files WHERE superseded=0"
                                " GROUP BY extract_status").fetchall())
        errors = [r[0] for r in c.execute("SELECT source_file || ': ' || coalesce(error, '') FROM ingest_files"
                                          " WHERE superseded=0 AND extract_status != 'done'")]
    finally:
        c.close()
    r = sqlite3.connect(f"file:{data_dir / 'collections' / 'fb' / 'rag.sqlite3'}?mode=ro", uri=True)
    try:
        chunks = r.execute("SELECT count(*) FROM embeddings").fetchone()[0]
    finally:
        r.close()
    return {"files_by_state": states, "not_done": errors, "chunks": chunks}


def _pdf_pages(pdf: Path) -> list[str]:
    out = subprocess.run(["pdftotext", "-enc", "UTF-8", str(pdf), "-"], capture_output=True, check=True).stdout
    pages = out.decode("utf-8", "replace").split("\f")
    if pages and not pages[-1].strip():
        pages.pop()
    return pages


_NUMBER = re.compile(r"(?<![\w.])\$?\(?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?")


def figures(text: str) -> set[str]:
    """The numbers of ``text`` with three or more digits, years left out, in one written form
    ("1,469.5" and "1469.50" are both "1469.5"): what a figure-answer is checked by."""
    out = set()
    for m in _NUMBER.finditer(text):
        whole, frac = m.group(1).replace(",", ""), (m.group(2) or "").rstrip("0").rstrip(".")
        if len(whole.lstrip("0")) + len(frac.lstrip(".")) < 3:
            continue
        if not frac and "," not in m.group(1) and len(whole) == 4 and 1900 <= int(whole) <= 2099:
            continue  # a year
        out.add(whole.lstrip("0") + frac if whole.strip("0") else "0" + frac)
    return out


def figure_questions(path: Path) -> list[tuple[str, set[str]]]:
    """(question, figures) for each question whose gold answer holds a figure (three or more
    digits, not a year) that its evidence text holds too: the answer can be quoted."""
    import json

    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        q = json.loads(line)
        evidence = figures(" ".join(e.get("evidence_text") or "" for e in q.get("evidence") or []))
        wanted = figures(str(q.get("answer") or "")) & evidence
        if wanted:
            out.append((q["question"], wanted))
    return out


def figure_answers(services, questions: list[tuple[str, set[str]]], embedder) -> dict:
    """The share of figure questions whose answer without an LLM quotes a gold figure, and whose
    answer's sources hold one (``passages_answer`` on the hybrid search ``ask`` runs, top 10)."""
    from ragweedd.answer import passages_answer

    answered = in_sources = 0
    rows = []
    for question, wanted in questions:
        hits = list(services.search(question, ["fb"], 10, mode="hybrid")["results"])
        text, sources = passages_answer(hits, query=question, embedder=embedder) if hits else ("", [])
        got = bool(figures(text) & wanted)
        src = bool(figures(" ".join(h.get("text") or "" for h in sources)) & wanted)
        answered += got
        in_sources += src
        rows.append({"question": question[-160:], "figures": sorted(wanted), "answer_has": got, "sources_have": src})
    n = len(questions)
    return {"n": n, "answer_has_figure": round(answered / n, 3) if n else 0.0,
            "sources_have_figure": round(in_sources / n, 3) if n else 0.0, "rows": rows}


def answer_sources(services, questions, evaluate) -> dict:
    """The no-LLM answer's numbered sources (``passages_answer`` over the hybrid search's top 10, at
    most five), judged as the search's hits are: doc_hit@1 is whether the answer's first source is
    the right filing, page_hit@5 whether one of its sources is an evidence page."""
    from ragweedd.answer import passages_answer

    def sources(q: str) -> list:
        hits = list(services.search(q, ["fb"], 10, mode="hybrid")["results"])
        return passages_answer(hits, query=q, embedder=services.embedder)[1] if hits else []

    return evaluate(questions, sources)


def bm25_pages(docs: Path, questions) -> dict:
    import bm25s
    import Stemmer

    from ragweedd.eval.questions import evaluate

    ids, texts = [], []
    for pdf in sorted(docs.glob("*.pdf")):
        for n, text in enumerate(_pdf_pages(pdf), 1):
            ids.append((pdf.name, n))
            texts.append(text)
    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)

    def search(query: str) -> list[dict]:
        res, _ = retriever.retrieve(bm25s.tokenize([query], stopwords="en", stemmer=stemmer, show_progress=False),
                                    k=10, show_progress=False)
        return [{"source_file": str(docs / ids[i][0]), "pages": [ids[i][1]]} for i in res[0]]

    out = evaluate(questions, search)
    out["pages_indexed"] = len(ids)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(DEFAULT_DATA), help="the FinanceBench folder (docs/, questions.jsonl)")
    ap.add_argument("--model", default="local:all-minilm-l6-v2")
    ap.add_argument("--workdir", help="scratch data dir (default: a new temp dir)")
    ap.add_argument("--reuse", action="store_true", help="keep an already ingested --workdir")
    ap.add_argument("--out", default="financebench")
    ap.add_argument("--extra", default="", help="more top-level config lines, e.g. 'chunk_context = false'")
    a = ap.parse_args()

    from ragweedd.config import load_config
    from ragweedd.embed.factory import make_embedder
    from ragweedd.eval.questions import evaluate, load
    from ragweedd.services import open_oneshot

    data = Path(a.data)
    docs = data / "docs"
    questions = load(data / "questions.jsonl")
    work = Path(a.workdir) if a.workdir else Path(tempfile.mkdtemp(prefix="ragweed-financebench-"))
    work.mkdir(parents=True, exist_ok=True)
    cfg_file = work / "ragweedd.toml"
    cfg_file.write_text(f'data_dir = "{work / "data"}"\nstate_dir = "{work / "state"}"\n'
                        f'cache_dir = "{work / "cache"}"\n{a.extra}\n[embed]\nmodel = "{a.model}"\n'
                        f'[collections.fb]\npaths = ["{docs.resolve()}"]\n')
    env = {**os.environ, "RAGWEED_LOG_LEVEL": "warning"}
    result: dict = {"model": a.model, "extra": a.extra, "docs": str(docs), "questions": len(questions)}
    if not (a.reuse and (work / "data" / "collections" / "fb" / "rag.sqlite3").exists()):
        result["ingest"] = _ingest(cfg_file, env)
    result["index"] = _counts(work / "data")
    pages = sum(len(_pdf_pages(p)) for p in sorted(docs.glob("*.pdf")))
    if "ingest" in result:
        s = result["ingest"]["seconds"]
        result["ingest"].update(files_per_s=round(44 / s, 3), pages_per_s=round(pages / s, 2),
                                chunks_per_s=round(result["index"]["chunks"] / s, 2))

    cfg = load_config(cfg_file, env={})
    services = open_oneshot(cfg, embedder=make_embedder(cfg.embed_model, cfg))
    rows = []
    try:
        for mode in ("hybrid", "keyword", "dense"):
            def search(q: str, mode: str = mode) -> list:
                return list(services.search(q, ["fb"], 10, mode=mode)["results"])

            res = evaluate(questions, search)
            result[mode] = res
            rows.append({"run": f"ragweedd {mode}", **{k: round(v["mean"], 3) for k, v in res["metrics"].items()}})
        result["answer_sources"] = answer_sources(services, questions, evaluate)
        rows.append({"run": "no-LLM answer's sources", **{k: round(v["mean"], 3)
                                                         for k, v in result["answer_sources"]["metrics"].items()}})
        result["figures"] = figure_answers(services, figure_questions(data / "questions.jsonl"), services.embedder)
    finally:
        services.close()
    base = bm25_pages(docs, questions)
    result["bm25_pages"] = base
    rows.append({"run": "bm25s pages (baseline)", **{k: round(v["mean"], 3) for k, v in base["metrics"].items()}})
    cols = ["run", "doc_hit@1", "doc_hit@5", "doc_hit@10", "page_hit@1", "page_hit@5", "page_hit@10",
            "doc_mrr@10", "page_mrr@10"]
    if "ingest" in result:
        print(f"ingest: {result['ingest']['seconds']} s, {result['index']['chunks']} chunks, {pages} pages; "
              f"{result['ingest']['files_per_s']} files/s, {result['ingest']['pages_per_s']} pages/s, "
              f"{result['ingest']['chunks_per_s']} chunks/s")
    print(f"files by state: {result['index']['files_by_state']}")
    for e in result["index"]["not_done"]:
        print(f"  not indexed: {e[:200]}")
    print(table(rows, cols))
    fig = result["figures"]
    print(f"figure questions (gold figure of 3+ digits, not a year, in the evidence): {fig['n']}; "
          f"no-LLM answer quotes it: {fig['answer_has_figure']}; its sources hold it: {fig['sources_have_figure']}")
    path = write_json(a.out, result)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
