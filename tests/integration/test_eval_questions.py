"""`ragweedd eval questions`: document and page hit rates of a question set over a collection
ingested from real PDFs (fpdf2) by the real one-shot ingest, in both accepted layouts, and a clear
error for every bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

from tests.data.make_fixtures import _pdf_text  # noqa: E402

WORDS = {"alpha": ["zebra grazing savanna", "quarterly revenue of walnut orchards", "glacier melting rates"],
         "beta": ["harbour dredging permits", "lighthouse lamp maintenance", "copper wire tariffs"]}


def _run(cfg: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAGWEED_EMBED_MODEL": "hash:64"}
    return subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(cfg), *args],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    base = tmp_path_factory.mktemp("evalq")
    docs = base / "filings"
    docs.mkdir()
    for name, topics in WORDS.items():
        _pdf_text(docs / f"{name.upper()}_2023_10K.pdf",
                  [f"Page {i + 1} of {name}. " + (f"This page is about {t}. " * 50) for i, t in enumerate(topics)])
    cfg = base / "ragweedd.toml"
    # one place per file: the wrong-page question then shows only its best page (the cap is the
    # search's, not the metric's; with three pages a file and the default of three, every page shows)
    cfg.write_text(f'data_dir = "{base / "data"}"\nstate_dir = "{base / "state"}"\ncache_dir = "{base / "cache"}"\n'
                   f'max_chunks_per_file = 1\n[collections.filings]\npaths = ["{docs}"]\n')
    r = _run(cfg, "ingest", "-c", "filings")
    assert r.returncode == 0, r.stderr
    return base, cfg


def _questions(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_hit_rates_in_our_layout(indexed):
    base, cfg = indexed
    qs = _questions(base / "q.jsonl", [
        {"id": "a2", "query": "walnut orchards quarterly revenue",
         "relevant": [{"file": "ALPHA_2023_10K.pdf", "page": 2}]},
        {"id": "b3", "query": "copper wire tariffs", "relevant": [{"file": "BETA_2023_10K", "page": 3}]},
        # the right file but the wrong page: a document hit, not a page hit
        {"id": "wrong-page", "query": "lighthouse lamp maintenance",
         "relevant": [{"file": "BETA_2023_10K.pdf", "page": 1}]},
        # no page given: counts for the document metrics only
        {"id": "no-page", "query": "glacier melting rates", "relevant": [{"file": "ALPHA_2023_10K.pdf"}]},
    ])
    out = base / "result.json"
    r = _run(cfg, "eval", "questions", str(qs), "--collection", "filings", "--json", "--out", str(out))
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert json.loads(out.read_text()) == res
    by_id = {q["id"]: q for q in res["per_question"]}
    assert by_id["a2"]["doc_rank"] == 1 and by_id["a2"]["page_rank"] == 1
    assert by_id["b3"]["doc_rank"] == 1 and by_id["b3"]["page_rank"] == 1
    assert by_id["wrong-page"]["doc_rank"] == 1 and by_id["wrong-page"]["page_rank"] is None
    assert by_id["no-page"]["doc_rank"] == 1 and not by_id["no-page"]["has_pages"]
    m = res["metrics"]
    assert res["questions"] == 4 and res["with_pages"] == 3
    assert m["doc_hit@1"]["mean"] == 1.0 and m["page_hit@1"]["mean"] == pytest.approx(2 / 3)
    assert m["page_hit@1"]["n"] == 3 and m["doc_mrr@10"]["mean"] == 1.0
    assert m["page_hit@10"]["lo"] <= m["page_hit@10"]["mean"] <= m["page_hit@10"]["hi"]
    table = _run(cfg, "eval", "questions", str(qs), "--collection", "filings")
    assert table.returncode == 0 and "page_hit@5" in table.stdout and "4 questions (3 with pages)" in table.stdout


def test_financebench_layout_is_read_with_its_zero_based_pages(indexed):
    base, cfg = indexed
    qs = _questions(base / "fb.jsonl", [
        {"financebench_id": "fb1", "company": "Alpha", "doc_name": "ALPHA_2023_10K",
         "question": "zebra savanna grazing", "answer": "x",
         "evidence": [{"doc_name": "ALPHA_2023_10K", "evidence_page_num": 0, "evidence_text": "..."}]},
    ])
    r = _run(cfg, "eval", "questions", str(qs), "--collection", "filings", "--json")
    assert r.returncode == 0, r.stderr
    q = json.loads(r.stdout)["per_question"][0]
    assert q["id"] == "fb1" and q["doc_rank"] == 1 and q["page_rank"] == 1


@pytest.mark.parametrize("content,message", [
    ('{"query": "x", "relevant": []}\n', "line 1: 'relevant' must be a non-empty list"),
    ('{"query": "x", "relevant": [{"file": "a.pdf"}]}\nnot json\n', "line 2:"),
    ('{"query": "", "relevant": [{"file": "a.pdf"}]}\n', "'query' must be a non-empty string"),
    ('{"query": "x", "relevant": [{"file": "a.pdf", "page": 0}]}\n', "'page' must be a whole number from 1"),
    ('[1, 2]\n', "not a JSON object"),
    ("\n\n", "holds no questions"),
])
def test_bad_question_files_are_refused_with_the_line(indexed, content, message):
    base, cfg = indexed
    qs = base / "bad.jsonl"
    qs.write_text(content)
    r = _run(cfg, "eval", "questions", str(qs), "--collection", "filings")
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_unknown_collection_and_missing_file(indexed):
    base, cfg = indexed
    qs = _questions(base / "ok.jsonl", [{"query": "x", "relevant": ["ALPHA_2023_10K.pdf"]}])
    r = _run(cfg, "eval", "questions", str(qs), "--collection", "nope")
    assert r.returncode != 0 and "collection 'nope'" in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = _run(cfg, "eval", "questions", str(base / "missing.jsonl"), "--collection", "filings")
    assert r.returncode == 2 and "cannot read the question file" in r.stderr and "Traceback" not in r.stderr
