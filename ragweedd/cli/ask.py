"""``ragweedd ask``: answer one question without a running daemon (issue 8 item 4).

Search exactly as ``ragweedd search`` does, hand the hits to the answer layer, print the answer as
its tokens arrive, then the numbered sources with file, place and score. With no LLM configured the
answer layer returns the top passages, labelled as such, and they are printed the same way. Every
answer is stored in the history the daemon uses, so ``ragweedctl history`` and ``ask --continue``
see it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any, TextIO

from ragweedd.answer import history as hist
from ragweedd.errors import RagweedError, RequestError


def search(cfg, paths, embedder, query: str, collections: list[str] | None, top_k: int) -> dict[str, Any]:
    """The hybrid search of DESIGN §8."""
    names = collections or sorted(p.name for p in paths.collections.glob("*") if (p / "rag.sqlite3").exists())
    if not names:
        raise RequestError(f"nothing is indexed yet under {paths.collections}",
                           hint="ingest first: ragweedd ingest PATH --collection NAME (or start the daemon)")
    from ragweedd.query.hybrid import one_shot_search

    return one_shot_search(cfg, paths, embedder, query, collections=names, top_k=top_k)


def run(cfg, args, out: TextIO | None = None, err: TextIO | None = None) -> int:
    from ragweedd.cli import common

    out = out or sys.stdout
    err = err or sys.stderr
    paths = common.paths_for(cfg)
    store = hist.HistoryStore(paths.history_db, max_entries=cfg.history_max_entries)
    try:
        if args.continue_id:
            if args.query:
                raise RequestError("give either a question or --continue HISTORY_ID, not both")
            return asyncio.run(_continue(cfg, store, args.continue_id, args.json, out, err))
        query = " ".join(args.query or []).strip()
        if not query:
            raise RequestError("ask needs a question", hint='ragweedd ask "what is ...?", or ragweedd ask --continue HISTORY_ID')
        if args.top_k < 1:
            raise RequestError(f"--top-k must be at least 1, not {args.top_k}")
        res = search(cfg, paths, common.make_embedder(cfg), query, args.collection, args.top_k)
        body = hist.pending_answer(res)
        hid = store.add("ask", query, body)
        from ragweedd.answer.answering import answer_question

        events = answer_question(query, res["results"], cfg)
        return asyncio.run(_stream(events, store, hid, body, res.get("retrieval_meta") or {}, args.json, out, err,
                                   record_errors=True))
    finally:
        store.close()


async def _continue(cfg, store, hid: str, as_json: bool, out: TextIO, err: TextIO) -> int:
    entry = store.show(hid)
    if entry.get("kind") != "ask" or not entry.get("state"):
        raise RequestError(f"history entry '{hid}' cannot be continued: only answers cut at max_tokens can",
                           hint="ragweedd ask prints the command to continue when an answer is cut")
    from ragweedd.answer.answering import continue_answer

    if not as_json:
        out.write(entry["state"].get("answer", ""))
    return await _stream(continue_answer(entry["state"], cfg), store, hid, entry, entry.get("retrieval_meta") or {},
                         as_json, out, err, record_errors=False)


async def _stream(events, store, hid: str, body: dict, meta: dict, as_json: bool, out: TextIO, err: TextIO, *,
                  record_errors: bool) -> int:
    parts: list[str] = []
    done: dict | None = None
    try:
        async for ev in events:
            t = ev.get("type")
            if t == "token":
                parts.append(ev["text"])
                if not as_json:
                    out.write(ev["text"])
                    out.flush()
            elif t == "done":
                done = ev
    except (RagweedError, KeyboardInterrupt, asyncio.CancelledError) as e:
        if not as_json and parts:
            out.write("\n")
        # a failed continuation keeps the entry (and its state) as it was, so it can be retried
        if record_errors:
            why = e.to_dict() if isinstance(e, RagweedError) else {"code": "cancelled", "message": "interrupted"}
            store.update(hid, hist.failed_answer(body, why, "".join(parts)))
        raise
    finally:
        await events.aclose()
    assert done is not None, "the answer layer ended without a done event"
    rec = hist.answer_record(done, meta)
    store.update(hid, rec)
    if as_json:
        shown = {k: v for k, v in rec.items() if k != "state"}
        json.dump({**shown, "history_id": hid, "query": done.get("query")}, out, ensure_ascii=False, default=str)
        out.write("\n")
        return 0
    out.write("\n")
    print_sources(rec, out)
    if rec.get("continuable"):
        out.write(f"\n(the answer was cut at max_tokens; continue with: ragweedd ask --continue {hid})\n")
    err.write(f"history entry {hid}\n")
    return 0


def print_sources(rec: dict, out: TextIO) -> None:
    """The numbered sources behind the answer: for an LLM answer the ones it cited (their numbers
    are the [N] in the text), for the passages answer every passage shown."""
    from ragweedd.cli.common import where

    sources = rec.get("sources") or []
    cited = set(rec.get("cited_numbers") or [])
    shown = [s for s in sources if s.get("n") in cited] if rec.get("mode") == "llm" else sources
    if shown:
        out.write("\nSources:\n")
    for s in shown:
        place = where(s)
        name = f"{s.get('collection')}/{s.get('source_rel_path') or s.get('filename')}"
        score = s.get("score")
        out.write(f"[{s.get('n')}] {name}" + (f"  [{place}]" if place else "")
                  + (f"  score {score:.3f}" if isinstance(score, (int, float)) else "") + "\n")
        if s.get("source_file"):
            out.write(f"    {s['source_file']}\n")
    left = len(sources) - len(shown)
    if rec.get("mode") == "llm" and left > 0:
        out.write(f"({left} more source{'s' if left != 1 else ''} given to the model but not cited; --json lists them)\n")
    if rec.get("invalid_citations"):
        out.write(f"(warning: the answer cites sources that do not exist: {rec['invalid_citations']})\n")
    filtered = rec.get("filtered") or []
    if filtered:
        out.write(f"({len(filtered)} passage{'s' if len(filtered) != 1 else ''} judged irrelevant by annotation "
                  "were left out)\n")
