"""``ragweedd ask``: answer one question without a running daemon.

Search exactly as ``ragweedd search`` does and run the same ask flow as the daemon
(ragweedd/answer/ask_flow.py); print the answer as its tokens arrive, then the numbered sources, best
first, with file, place and how well each matched (strong / partial / weak), each with the sentences
quoted from it and the uri that opens each. With no LLM configured the answer is those sentences
(ragweedd/answer/quotes.py), labelled as such.
Every answer is stored in the history the daemon uses, so ``ragweedctl history`` and ``ask
--continue`` see it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import TYPE_CHECKING, TextIO

from ragweedd.cli.ctl_text import print_citation_checks, print_tree, say_rewrite
from ragweedd.config import Config
from ragweedd.errors import RagweedError, RequestError

if TYPE_CHECKING:
    import argparse
    from collections.abc import AsyncIterator

    from ragweedd.contract import AskEvent, DoneEvent
    from ragweedd.services import Services


def run(cfg: Config, args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    from ragweedd.services import open_oneshot

    out = out or sys.stdout
    err = err or sys.stderr
    if args.continue_id and args.query:
        raise RequestError("give either a question or --continue HISTORY_ID, not both")
    follow_up, conversation = getattr(args, "follow_up", False), getattr(args, "conversation", None)
    if follow_up and conversation:
        raise RequestError("give --follow-up (the last conversation) or --conversation ID, not both")
    if args.continue_id and (follow_up or conversation):
        raise RequestError("--continue finishes a cut answer; --follow-up and --conversation ask a new question")
    query = " ".join(args.query or []).strip()
    if not args.continue_id:
        if not query:
            raise RequestError("ask needs a question",
                               hint='ragweedd ask "what is ...?", or ragweedd ask --continue HISTORY_ID')
        if args.limit < 1:
            raise RequestError(f"--limit must be at least 1, not {args.limit}")
    services = open_oneshot(cfg)
    try:
        return asyncio.run(_ask(services, query, args, out, err))
    finally:
        services.close()


async def _ask(services: Services, query: str, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    flow = services.ask_flow
    if args.continue_id:
        entry, events = await flow.resume(args.continue_id)
        if not args.json:
            out.write(entry["state"].get("answer", ""))
    else:
        tree = services.tree_scope(args.collection, getattr(args, "tree", None) or "hybrid")
        if tree is not None and not services.cfg.llm_synthesis:
            from ragweedd.answer.tree_ask import no_llm_error

            raise no_llm_error()  # before a search that would be wasted
        cid = await asyncio.to_thread(_conversation, services, args)
        thread = await asyncio.to_thread(services.history.thread, cid) if cid else []
        res = await services.followup_search(query, thread, collections=args.collection, limit=args.limit)
        if not args.json:
            say_rewrite(res["retrieval_meta"].get("rewrite"), err)
        events = await flow.ask(query, res, tree=tree, conversation_id=cid, thread=thread)
    return await _print(services, events, args.json, out, err)


def _conversation(services: Services, args: argparse.Namespace) -> str | None:
    """The conversation the question continues: --conversation ID, the last one with --follow-up."""
    if getattr(args, "conversation", None):
        return str(args.conversation)
    if not getattr(args, "follow_up", False):
        return None
    items = services.history.conversations(0, 1)["items"]
    if not items:
        raise RequestError("there is no conversation to follow up yet: ask a first question without --follow-up")
    return str(items[0]["id"])


async def _print(services: Services, events: AsyncIterator[AskEvent], as_json: bool, out: TextIO,
                 err: TextIO) -> int:
    """Print the answer as its tokens arrive, then its numbered sources (or one JSON record)."""
    started = False
    done: DoneEvent | None = None
    try:
        async for ev in events:
            if ev["type"] == "token":
                started = True
                if not as_json:
                    out.write(ev["text"])
                    out.flush()
            elif ev["type"] == "done":
                done = ev
    except (RagweedError, KeyboardInterrupt, asyncio.CancelledError):
        if not as_json and started:
            out.write("\n")
        raise
    assert done is not None, "the answer layer ended without a done event"
    hid = done["history_id"]
    # the record as the history keeps it (what ragweedctl history shows), without its resume state
    entry = await asyncio.to_thread(services.history.show, hid)
    rec = {k: v for k, v in entry.items() if k not in ("state", "id", "kind", "created_at")}
    rec["history_id"] = hid
    if as_json:
        json.dump(rec, out, ensure_ascii=False, default=str)
        out.write("\n")
        return 0
    out.write("\n")
    print_sources(rec, out)
    if rec.get("continuable"):
        out.write(f"\n(the answer was cut at max_tokens; continue with: ragweedd ask --continue {hid})\n")
    if done.get("llm_setup"):
        err.write(f"note: {done['llm_setup']}\n")
    err.write(f"history entry {hid}\n")
    if done.get("conversation_id"):
        err.write(f"conversation {done['conversation_id']}, turn {done.get('turn')} "
                  "(follow up with: ragweedd ask -f QUESTION)\n")
    return 0


def print_sources(rec: dict, out: TextIO) -> None:
    """The numbered sources behind the answer, best first, each with its quoted sentences: for an LLM
    answer the ones it cited (their numbers are the [N] in the text), without an LLM every source
    quoted."""
    from ragweedd.cli.ctl_text import by_score, print_source

    sources = rec.get("sources") or []
    cited = set(rec.get("cited_numbers") or [])
    shown = [s for s in sources if s.get("n") in cited] if rec.get("mode") == "llm" else sources
    if shown:
        out.write("\nSources:\n")
    for s in by_score(shown):
        print_source(s, out)
    left = len(sources) - len(shown)
    if rec.get("mode") == "llm" and left > 0:
        out.write(f"({left} more source{'s' if left != 1 else ''} given to the model but not cited; "
                  "--json lists them)\n")
    if rec.get("invalid_citations"):
        out.write(f"(warning: the answer cites sources that do not exist: {rec['invalid_citations']})\n")
    print_citation_checks(rec, out)
    print_tree(rec, out)
    filtered = rec.get("filtered") or []
    if filtered:
        out.write(f"({len(filtered)} passage{'s' if len(filtered) != 1 else ''} judged irrelevant by annotation "
                  "were left out)\n")
