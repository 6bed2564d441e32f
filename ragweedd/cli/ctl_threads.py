"""ragweedctl's conversations: which one ``ask -f`` / ``--conversation`` continues, what it says
about the query a follow-up was searched as, and ``history`` (entries, ``--threads``, one thread
in full, ``--delete``). Imported only by those commands (standard library and the contract only),
so ragweedctl's start-up stays what it was."""

from __future__ import annotations

import re

from ragweedd.cli.ctl_http import Client, CtlError, path_segment, query_string
from ragweedd.cli.ctl_text import _print_json, _print_sources, print_citation_checks, print_tree, safe, safe_text
from ragweedd.cli.exits import EXIT_OK, EXIT_USAGE
from ragweedd.contract import CONVERSATION_ID_PATTERN

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: ragweedctl starts without importing typing
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from ragweedd.cli.ctl_text import Writer

_CONVERSATION = re.compile(CONVERSATION_ID_PATTERN.replace("$", r"\Z"))


def is_conversation_id(text: str) -> bool:
    return bool(_CONVERSATION.match(text or ""))


def conversation_to_continue(c: Client, a: argparse.Namespace) -> str | None:
    """The conversation an ``ask`` continues: ``--conversation ID``, the last one continued on any
    face with ``-f/--follow-up``, else None (the answer starts a new one)."""
    if a.follow_up and a.conversation:
        raise CtlError("give --follow-up (the last conversation) or --conversation ID, not both", EXIT_USAGE)
    if a.continue_id and (a.follow_up or a.conversation):
        raise CtlError("--continue finishes a cut answer; --follow-up and --conversation ask a new question",
                       EXIT_USAGE)
    if a.conversation:
        return str(a.conversation)
    if not a.follow_up:
        return None
    items = c.call("GET", "/v1/conversations?limit=1").get("items") or []
    if not items:
        raise CtlError("there is no conversation to follow up yet: ask a first question without --follow-up",
                       EXIT_USAGE)
    return str(items[0]["id"])


# --------------------------------------------------------------------------- history
def cmd_history(c: Client, a: argparse.Namespace, out: Writer) -> int:
    if a.delete:
        if a.history_id or a.threads:
            raise CtlError("--delete takes a conversation id on its own", EXIT_USAGE)
        return _delete(c, a, out)
    if a.history_id and is_conversation_id(a.history_id):
        return _thread(c, a, out)
    if a.history_id:
        return _entry(c, a, out)
    if a.threads:
        return _threads(c, a, out)
    res = c.call("GET", "/v1/history" + query_string({"offset": a.offset, "limit": a.limit}))
    if a.json:
        _print_json(res, out)
        return EXIT_OK
    for h in res.get("items", []):
        turn = f"{safe(h['conversation_id'])} #{safe(h.get('turn'))}" if h.get("conversation_id") else ""
        out.write(f"{safe(h.get('id'))}  {safe(h.get('created_at'))}  {safe(h.get('kind')):<6}  {turn:<22s}"
                  f"{safe(h.get('query'))}\n")
    return EXIT_OK


def _threads(c: Client, a: argparse.Namespace, out: Writer) -> int:
    res = c.call("GET", "/v1/conversations" + query_string({"offset": a.offset, "limit": a.limit}))
    if a.json:
        _print_json(res, out)
        return EXIT_OK
    for t in res.get("items", []):
        n = t.get("turn_count", 0)
        out.write(f"{safe(t.get('id'))}  {safe(t.get('updated_at'))}  {n:>3} turn{'s' if n != 1 else ' '}  "
                  f"{safe(t.get('title'))}\n")
    out.write(f"{len(res.get('items', []))} of {res.get('total', 0)} conversations; "
              "`ragweedctl history ID` shows one\n")
    return EXIT_OK


def _thread(c: Client, a: argparse.Namespace, out: Writer) -> int:
    t = c.call("GET", f"/v1/conversations/{path_segment(a.history_id)}")
    if a.json:
        _print_json(t, out)
        return EXIT_OK
    turns = t.get("turns") or []
    out.write(f"conversation {safe(t.get('id'))}: {len(turns)} turn{'s' if len(turns) != 1 else ''}, "
              f"started {safe(t.get('created_at'))}, last {safe(t.get('updated_at'))}\n")
    for e in turns:
        out.write(f"\n── turn {safe(e.get('turn'))}  {safe(e.get('created_at'))}  (history {safe(e.get('id'))})\n")
        _print_answer(e, out)
    return EXIT_OK


def _entry(c: Client, a: argparse.Namespace, out: Writer) -> int:
    h = c.call("GET", f"/v1/history/{path_segment(a.history_id)}")
    if a.json:
        _print_json(h, out)
        return EXIT_OK
    out.write(f"{safe(h.get('id'))}  {safe(h.get('kind'))}  {safe(h.get('created_at'))}\n")
    if h.get("conversation_id"):
        out.write(f"  turn {safe(h.get('turn'))} of conversation {safe(h['conversation_id'])}\n")
    _print_answer(h, out)
    return EXIT_OK


def _print_answer(h: dict[str, Any], out: Writer) -> None:
    """One entry as ``ragweedctl ask`` printed it: the question, what it was searched as, the
    answer, its sources and checks."""
    out.write(f"  query: {safe(h.get('query'))}\n")
    rw = h.get("rewrite") or {}
    if rw.get("rewritten"):
        out.write(f"  searched for: {safe(rw.get('query'))}\n")
    if (h.get("error") or {}).get("message"):
        out.write(f"  failed: {safe(h['error']['message'])}\n")
    if h.get("answer"):
        out.write(f"\n{safe_text(h['answer'])}\n")
    _print_sources(h.get("sources") or h.get("results") or [], out)
    print_citation_checks(h, out)  # as ragweedctl ask printed them when it answered
    print_tree(h, out)


def _delete(c: Client, a: argparse.Namespace, out: Writer) -> int:
    res = c.call("DELETE", f"/v1/conversations/{path_segment(a.delete)}")
    if a.json:
        _print_json(res, out)
        return EXIT_OK
    n = res.get("turns", 0)
    out.write(f"deleted conversation {safe(res.get('id'))} and its {n} turn{'s' if n != 1 else ''}\n")
    return EXIT_OK
