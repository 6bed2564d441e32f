"""`ragweedd eval beir DIR [--split train] [--json] [--limit N]` and `ragweedd eval questions FILE
--collection NAME` (argparse only at import: the CLI imports this module at start-up)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragweedd.config import Config
from ragweedd.query.merge import FUSIONS

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    from ragweedd.cli.options import add_tree_option, add_verbose_option

    e = sub.add_parser("eval", help="measure retrieval quality (dense, keyword, hybrid) on a dataset")
    es = e.add_subparsers(dest="eval_cmd", required=True)
    b = es.add_parser("beir", help="a BEIR-layout dataset: corpus.jsonl, queries.jsonl, qrels/<split>.tsv")
    b.add_argument("dir", help="dataset folder")
    b.add_argument("--split", default="train", help="qrels split to evaluate (default: train)")
    b.add_argument("--limit", type=int, help="evaluate only the first N judged queries")
    b.add_argument("--json", action="store_true", help="print the full result as JSON")
    b.add_argument("--chunk-size", type=int, help="override chunk_size (tokens) for this run")
    b.add_argument("--fusion", choices=FUSIONS, help="override fusion for this run")
    b.add_argument("--modes", default="dense,keyword,hybrid", help="comma-separated subset of dense,keyword,hybrid")
    b.add_argument("--depth", type=int, default=300, help="candidate chunks per mode (>= 100 for Recall@100)")
    b.add_argument("--workdir", help="scratch folder for the ingested corpus (default: under the cache dir)")
    add_verbose_option(b)
    q = es.add_parser("questions", help="document and page hit rates of a question set (JSONL) over an indexed "
                                        "collection")
    q.add_argument("file", help='JSONL: {"query", "relevant": [{"file", "page"?}]} per line, or FinanceBench\'s '
                                "questions.jsonl")
    q.add_argument("--collection", "-c", action="append", required=True,
                   help="collection to search (repeat for several)").completer = "collections"  # type: ignore[attr-defined]
    q.add_argument("--mode", choices=("hybrid", "dense", "keyword"), default="hybrid",
                   help="which search to measure (default: hybrid, what the daemon serves)")
    q.add_argument("--limit", type=int, help="evaluate only the first N questions")
    q.add_argument("--json", action="store_true", help="print the full result (with each question's ranks) as JSON")
    q.add_argument("--out", help="also write the full result as JSON to this file")
    add_verbose_option(q)
    a = es.add_parser("answers", help="answer quality (faithfulness, relevance, context precision and recall, "
                                      "citations) of a question set, scored by an LLM judge")
    a.add_argument("file", help='JSONL: {"question", "reference"?, "relevant"?: ["file", ...]} per line')
    a.add_argument("--collection", "-c", action="append",
                   help="collection to search (repeat for several; default all)").completer = "collections"  # type: ignore[attr-defined]
    a.add_argument("--judge", metavar="PROVIDER:MODEL", help="the judge model (default: [llm] judge, else synthesis)")
    add_tree_option(a)
    a.add_argument("--top-k", type=int, default=10, help="passages retrieved for each answer (default 10)")
    a.add_argument("--limit", type=int, help="evaluate only the first N questions")
    a.add_argument("--json", action="store_true", help="print the full result as JSON")
    a.add_argument("--out", help="also write the full result as JSON to this file")
    add_verbose_option(a)


def run(cfg: Config, args: argparse.Namespace) -> int:
    if args.eval_cmd == "questions":
        return _run_questions(cfg, args)
    if args.eval_cmd == "answers":
        return _run_answers(cfg, args)

    from ragweedd.cli import common
    from ragweedd.errors import RequestError
    from ragweedd.eval import beir

    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    bad = [m for m in modes if m not in beir.MODES]
    if bad or not modes:
        raise RequestError(f"--modes {args.modes!r}: unknown mode(s) {', '.join(bad) or '(none given)'}",
                           hint="use a comma-separated subset of dense,keyword,hybrid")
    if args.depth < 10:
        raise RequestError(f"--depth must be at least 10, not {args.depth}")
    cfg = beir.with_overrides(cfg, chunk_size=args.chunk_size, fusion=args.fusion)
    if args.chunk_size is not None:
        from ragweedd.config import KEYS

        spec = next(k for k in KEYS if k.attr == "chunk_size")
        allowed = spec.check(args.chunk_size) if spec.check else None
        if allowed:
            raise RequestError(f"--chunk-size {args.chunk_size}: allowed: {allowed}")
    embedder = common.make_embedder(cfg)

    def progress(m: str) -> None:
        print(m, file=sys.stderr, flush=True)

    res = beir.run(args.dir, cfg, embedder, split=args.split, limit=args.limit, modes=modes, depth=args.depth,
                   workdir=Path(args.workdir) if args.workdir else None, progress=progress)
    if args.json:
        json.dump(res, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(beir.table(res))
    return 0


def _run_questions(cfg: Config, args: argparse.Namespace) -> int:
    from ragweedd.eval import questions
    from ragweedd.services import open_oneshot

    qs = _first(questions.load(args.file), args.limit)
    from ragweedd.eval.beir import with_overrides

    # no semantic search cache: each question is measured on its own results, never a neighbour's
    services = open_oneshot(with_overrides(cfg, search_cache_size=0))  # the model serving now
    try:
        services.searchable(args.collection)  # a name that does not exist fails before any search

        def search(query: str) -> list:

            # search_async, as the daemon serves it: a configured [llm] rerank is measured too
            res = asyncio.run(services.search_async(query, args.collection, max(questions.KS), mode=args.mode))
            return list(res["results"])

        res = questions.evaluate(qs, search, progress=lambda m: print(m, file=sys.stderr, flush=True))
    finally:
        services.close()
    res.update(file=str(args.file), collections=args.collection, mode=args.mode)
    return _report(res, args, questions.table)


def _run_answers(cfg: Config, args: argparse.Namespace) -> int:
    from ragweedd.errors import RequestError
    from ragweedd.eval import answers

    items = _first(answers.load(args.file), args.limit)
    if args.top_k < 1:
        raise RequestError(f"--top-k must be at least 1, not {args.top_k}")
    spec = args.judge or cfg.llm_judge or cfg.llm_synthesis
    if not spec:
        raise RequestError("eval answers needs a judge LLM, and neither --judge nor [llm] judge nor [llm] synthesis "
                           "is set", hint='pass --judge PROVIDER:MODEL (e.g. --judge "ollama:qwen2.5:14b")')
    from ragweedd.eval.beir import with_overrides
    from ragweedd.llm.factory import make_provider
    from ragweedd.services import open_oneshot

    judge = make_provider(spec, cfg, key="--judge" if args.judge else "llm.judge" if cfg.llm_judge else "llm.synthesis")
    services = open_oneshot(with_overrides(cfg, search_cache_size=0))  # the model serving now

    async def go() -> dict:
        from ragweedd.answer.answering import ask

        async def answer(question: str) -> dict:
            res = await services.search_async(question, args.collection, args.top_k)
            tree = services.tree_scope(args.collection, args.tree or "hybrid")
            if tree is None:
                return await ask(question, [dict(h) for h in res["results"]], cfg, embedder=services.embedder)
            from ragweedd.answer.tree_ask import tree_answer

            done: dict = {}
            async for ev in tree_answer(question, dict(res), cfg, tree, embedder=services.embedder):
                if ev["type"] == "done":
                    done = ev
            return done

        try:
            return await answers.evaluate(items, answer, judge, answer_spec=cfg.llm_synthesis or None,
                                          progress=lambda m: print(m, file=sys.stderr, flush=True))
        finally:
            await judge.aclose()

    try:
        services.searchable(args.collection)  # a name that does not exist fails before any question
        res = asyncio.run(go())
    finally:
        services.close()
    res.update(file=str(args.file), collections=args.collection, mode=args.tree or "hybrid")
    return _report(res, args, answers.table, default=str)


def _first(items: list, limit: int | None) -> list:
    """The first ``--limit`` questions (all without one)."""
    from ragweedd.errors import RequestError

    if limit is None:
        return items
    if limit < 1:
        raise RequestError(f"--limit must be at least 1, not {limit}")
    return items[:limit]


def _report(res: dict, args: argparse.Namespace, table: Callable[[dict], str],
            default: Callable[[object], str] | None = None) -> int:
    """The results to ``--out`` (if given), then as JSON (``--json``) or the table."""

    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1, default=default) + "\n", encoding="utf-8")
    if args.json:
        json.dump(res, sys.stdout, indent=1, default=default)
        sys.stdout.write("\n")
    else:
        print(table(res))
    return 0
