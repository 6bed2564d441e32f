"""Hit rates of a real question set over an already indexed collection (docs/retrieval.md,
"Measuring your own folders").

A question set is JSON Lines, one question per line::

    {"query": "What was 3M's FY2018 capex?", "relevant": [{"file": "3M_2018_10K.pdf", "page": 60}]}

``file`` names a relevant document: an absolute path, a path relative to a collection root, or a
file name with or without its extension (``3M_2018_10K`` matches ``/any/folder/3M_2018_10K.pdf``).
``page`` (optional, 1-based, as a PDF viewer counts) makes the question count for the page metrics
too. An optional ``id`` names the question in the per-question output. FinanceBench's own layout
(``question``, ``doc_name``, ``evidence[].evidence_page_num``, which is 0-based) is read as well.

Every question is searched once through the same search the daemon serves (one-shot services,
which only read and may run beside a daemon). Over the top ``k`` hits (chunks, best first):

- document hit@k: some hit comes from a relevant file;
- page hit@k: some hit comes from a relevant file and its pages cover a relevant page;
- MRR@10 (document and page): 1 / rank of the first such hit in the top 10, else 0.

Means come with 95 % bootstrap intervals over the questions.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

from ragweedd.errors import RequestError
from ragweedd.eval.metrics import bootstrap_ci

T = TypeVar("T")

KS = (1, 5, 10)


@dataclass(frozen=True)
class Relevant:
    file: str
    page: int | None = None


@dataclass
class Question:
    id: str
    query: str
    relevant: list[Relevant] = field(default_factory=list)

    @property
    def has_pages(self) -> bool:
        return any(r.page is not None for r in self.relevant)


QUESTIONS_HINT = ('each line is {"query": "...", "relevant": [{"file": "...", "page": N}]} '
                  "(see docs/retrieval.md)")


def read_lines(path: str | os.PathLike, parse: Callable[[Any, int], T], hint: str) -> list[T]:
    """``parse(object, line number)`` of every non-blank line of a JSON Lines file in UTF-8; a
    ValueError, TypeError or KeyError it raises, or a line that is not JSON, is an error naming the
    file and the line; a file with no line at all is one too."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise RequestError(f"cannot read the question file {p}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise RequestError(f"{p} is not UTF-8 text", hint="question files are JSON Lines in UTF-8") from None
    out: list[T] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise RequestError(f"{p}, line {n}: not JSON ({e})", hint=hint) from None
        try:
            out.append(parse(obj, n))
        except RequestError as e:  # what the line lacks, said by the parser
            raise RequestError(f"{p}, line {n}: {e.message}", hint=hint) from None
        except (ValueError, TypeError, KeyError) as e:  # a FinanceBench field of the wrong kind
            raise RequestError(f"{p}, line {n}: {type(e).__name__}: {e}", hint=hint) from None
    if not out:
        raise RequestError(f"{p} holds no questions", hint=hint)
    return out


def load(path: str | os.PathLike) -> list[Question]:
    """Questions of a JSONL file in either layout; a bad line is an error naming its number."""
    return read_lines(path, _question, QUESTIONS_HINT)


def _question(obj: Any, n: int) -> Question:
    if not isinstance(obj, dict):
        raise RequestError("not a JSON object")
    if "question" in obj and "doc_name" in obj:  # FinanceBench's layout; its pages are 0-based
        rel = [Relevant(str(e["doc_name"]), int(e["evidence_page_num"]) + 1)
               for e in obj.get("evidence") or [] if e.get("evidence_page_num") is not None]
        rel = rel or [Relevant(str(obj["doc_name"]))]
        return Question(str(obj.get("financebench_id") or n), _text(obj["question"], "question"), rel)
    query = _text(obj.get("query"), "query")
    relevant = obj.get("relevant")
    if not isinstance(relevant, list) or not relevant:
        raise RequestError("'relevant' must be a non-empty list of {\"file\", \"page\"?}")
    rel = []
    for r in relevant:
        if isinstance(r, str):
            rel.append(Relevant(r))
            continue
        page = r.get("page")
        if page is not None and (not isinstance(page, int) or isinstance(page, bool) or page < 1):
            raise RequestError(f"'page' must be a whole number from 1, not {page!r}")
        rel.append(Relevant(_text(r.get("file"), "relevant[].file"), page))
    return Question(str(obj.get("id") or n), query, rel)


def _text(v: Any, name: str) -> str:
    if not isinstance(v, str) or not v.strip():
        raise RequestError(f"'{name}' must be a non-empty string")
    return v


def file_matches(hit: dict, wanted: str) -> bool:
    src = hit.get("source_file") or ""
    if wanted == src or wanted == (hit.get("source_rel_path") or ""):
        return True
    name = os.path.basename(src)
    return wanted in (name, os.path.splitext(name)[0])


def _pages(hit: dict) -> set[int]:
    pages = set(hit.get("pages") or [])
    label = hit.get("page_label")
    if not pages and isinstance(label, str) and label.isdecimal():
        pages.add(int(label))
    return pages


def ranks(q: Question, hits: Sequence[dict]) -> tuple[int | None, int | None]:
    """1-based rank of the first hit from a relevant file, and of the first on a relevant page."""
    doc = page = None
    for i, h in enumerate(hits, 1):
        for r in q.relevant:
            if not file_matches(h, r.file):
                continue
            doc = doc or i
            if r.page is not None and r.page in _pages(h):
                page = page or i
        if doc and (page or not q.has_pages):
            break
    return doc, page


def evaluate(questions: Sequence[Question], search: Callable[[str], Sequence[dict]], *,
             progress: Callable[[str], None] | None = None, samples: int = 1000) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for i, q in enumerate(questions, 1):
        hits = list(search(q.query))
        doc, page = ranks(q, hits)
        rows.append({"id": q.id, "query": q.query, "doc_rank": doc, "page_rank": page, "has_pages": q.has_pages,
                     "top": [{"file": os.path.basename(h.get("source_file") or ""), "pages": sorted(_pages(h))}
                             for h in hits[:5]]})
        if progress and i % 20 == 0:
            progress(f"{i}/{len(questions)} questions")

    def stat(values: list[float]) -> dict[str, float]:
        lo, hi = bootstrap_ci(values, samples=samples)
        return {"mean": sum(values) / len(values) if values else 0.0, "lo": lo, "hi": hi, "n": len(values)}

    paged = [r for r in rows if r["has_pages"]]
    metrics: dict[str, dict[str, float]] = {}
    for k in KS:
        metrics[f"doc_hit@{k}"] = stat([1.0 if r["doc_rank"] and r["doc_rank"] <= k else 0.0 for r in rows])
    for k in KS:
        metrics[f"page_hit@{k}"] = stat([1.0 if r["page_rank"] and r["page_rank"] <= k else 0.0 for r in paged])
    metrics["doc_mrr@10"] = stat([1.0 / r["doc_rank"] if r["doc_rank"] and r["doc_rank"] <= 10 else 0.0
                                  for r in rows])
    metrics["page_mrr@10"] = stat([1.0 / r["page_rank"] if r["page_rank"] and r["page_rank"] <= 10 else 0.0
                                   for r in paged])
    return {"questions": len(rows), "with_pages": len(paged), "metrics": metrics, "per_question": rows}


def table(res: dict[str, Any]) -> str:
    lines = [f"{res['questions']} questions ({res['with_pages']} with pages)", "",
             f"{'metric':<14} {'mean':>6}  95% interval", f"{'-' * 14} {'-' * 6}  {'-' * 15}"]
    for name, m in res["metrics"].items():
        lines.append(f"{name:<14} {m['mean']:6.3f}  [{m['lo']:.3f}, {m['hi']:.3f}]")
    return "\n".join(lines)
