"""ragweedctl: a small client for the ragweedd API (standard library only).

It must start fast (well under 100 ms: launchers call it on every keystroke), so it imports only
argparse, json, os, socket and sys at start-up. It speaks HTTP/1.1 over a plain socket instead of
using http.client or urllib: those pull in the email package and ssl, which alone cost ~50 ms
here. The server is always our own aiohttp app, which answers with Content-Length or chunked
bodies; that is all this client has to understand.

Exit codes: 0 ok, 1 the daemon reported an error (5xx) or I/O failed, 2 bad request/usage
(4xx), 3 the daemon is not running.
"""

from __future__ import annotations

import argparse
import os
import sys

from ragweedd import __version__
from ragweedd.cli.ctl_http import (
    Client,
    CtlError,
    api_error,
    bad_reply,
    parse_json,
    path_segment,
    query_string,
    sse_events,
)
from ragweedd.cli.ctl_text import (
    SafeWriter,
    _duration,
    _print_json,
    _print_sources,
    _where,
    ingest_line,
    print_hit_list,
    safe,
    safe_text,
    use_color,
    vectors_line,
)
from ragweedd.cli.exits import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    UsageErrorParser,
    argv_wants_json,
    print_json_error,
    quiet_broken_pipe,
)
from ragweedd.cli.open_ui import add_open_parser, cmd_open
from ragweedd.cli.options import add_limit_option, add_tree_option, hide_commands, positive_int

# The response shapes are ragweedd.contract's; imported for the type checker only, because the
# contract module (typing and its classes) would cost ragweedctl ~10 ms at every start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, TextIO

    from ragweedd.cli.ctl_text import Writer
    from ragweedd.contract import Status

HELP_WIDTH = 88
# The whole request, per command, unless --timeout says otherwise: status is what launchers poll.
TIMEOUTS = {"status": 5.0, "upload": 300.0, "ask": 600.0}
DEFAULT_TIMEOUT = 30.0


# --------------------------------------------------------------------------- connection
def _state_dir(arg: str | None) -> str:
    if arg:
        return os.path.expanduser(arg)
    if os.environ.get("RAGWEED_STATE_DIR"):
        return os.path.expanduser(os.environ["RAGWEED_STATE_DIR"])
    from ragweedd.paths import Paths  # stdlib-only module

    return str(Paths.resolve().state)


# --------------------------------------------------------------------------- output helpers
# --------------------------------------------------------------------------- commands
def cmd_status(c: Client, a: argparse.Namespace, out: Writer) -> int:
    if a.watch:
        from ragweedd.cli.watch import watch

        if not a.interval > 0:
            raise CtlError(f"--interval must be a positive number of seconds, not {a.interval}", EXIT_USAGE)
        # its lines are numbers only, so the raw stream: the redraw needs its cursor movements
        raw = out.out if isinstance(out, SafeWriter) else out
        return watch(c, a, raw, tty=not a.json and out.isatty())
    s: Status = c.call("GET", "/v1/status")
    if a.json:
        _print_json(s, out)
        return EXIT_OK
    out.write(f"ragweedd {safe(s['version'])} on {c.host}:{c.port} (pid {s['pid']}, up {_duration(s['uptime_s'])})\n")
    for col in s["collections"]:
        flag = "" if col["available"] else "  (unavailable)"
        out.write(f"  collection {safe(col['name'])}: {col['documents']} documents{flag}\n")
    if s["files_by_state"]:
        out.write("  files: " + ", ".join(f"{k} {v}" for k, v in sorted(s["files_by_state"].items())) + "\n")
    q = s["queue"]
    out.write(f"  queue: {q['queued']} queued, {q['running']} running, {q['debouncing']} settling"
              + (f", {q['failed']} failed" if q["failed"] else "") + "\n")
    out.write(f"  {ingest_line(s['ingest'])}\n")
    out.write(f"  {vectors_line(s['vectors'])}\n")
    emb = s["embedder"]
    out.write(f"  embedder: {emb['id']} ({emb['dim']}-d)\n")
    mig = s.get("embed_migration")
    if mig:
        dim = f" ({mig['dim']}-d)" if mig["dim"] else ""  # not known while the new model cannot be loaded
        out.write(f"  changing embed.model to {safe(mig['model'])}{dim}: {mig['state']}, "
                  f"{mig['vectors']} vectors, {mig['pending_chunks']} chunks waiting ({mig['percent']}%); "
                  f"searches use {mig['old_embedder_id']} until then\n")
    for ps in s.get("embed_passes") or []:
        if ps["state"] == "ok":  # a skipped pass is told under DEGRADED
            out.write(f"  extra pass {ps['key']}: {safe(ps['model'])} ({ps['dim']}-d), {ps['vectors']} vectors, "
                      f"{ps['pending_chunks']} chunks waiting\n")
    if s["last_flush"]:
        out.write(f"  last index flush: {s['last_flush']}\n")
    for job in s["next_jobs"]:
        out.write(f"  next: {job['name']} at {job['at']}\n")
    for why in s["degraded"]:
        out.write(f"  DEGRADED: {safe(why)}\n")
    for tool in s["missing_tools"]:
        kind = "optional tool" if tool["optional"] else "missing tool"
        out.write(f"  {kind} {tool['tool']} (install {tool['package']}) for {', '.join(tool['formats'])}\n")
    return EXIT_OK


def _filters(a: argparse.Namespace) -> dict:
    f = {"collections": a.collection or None, "top_k": a.limit, "path_glob": a.path_glob,
         "file_type": a.type, "doc_id": a.doc}
    return {k: v for k, v in f.items() if v is not None}


def cmd_search(c: Client, a: argparse.Namespace, out: Writer) -> int:
    res = c.call("POST", "/v1/search", {"query": " ".join(a.query), **_filters(a)})
    if a.json:
        _print_json(res, out)
        return EXIT_OK
    print_hit_list(res.get("results", []), out, use_color(out))
    return EXIT_OK


def cmd_ask(c: Client, a: argparse.Namespace, out: Writer) -> int:  # noqa: C901 - one branch per ask option (continue, follow-up, tree, stream, json)
    in_thread = bool(a.follow_up or a.conversation)
    if a.continue_id:
        if in_thread:
            from ragweedd.cli.ctl_threads import conversation_to_continue

            conversation_to_continue(c, a)  # says why the two do not go together
        path, body = f"/v1/ask/{path_segment(a.continue_id)}/continue", None
        if not a.json:
            path += "?stream=true"
    else:
        if not a.query:
            raise CtlError("ask needs a question (or --continue HISTORY_ID)", EXIT_USAGE)
        path, body = "/v1/ask", {"query": " ".join(a.query), **_filters(a)}
        if a.tree:
            body["mode"] = "tree"
        if in_thread:
            from ragweedd.cli.ctl_threads import conversation_to_continue

            body["conversation_id"] = conversation_to_continue(c, a)
    if a.json:
        if body is None:
            path += "?stream=false"
        else:
            body["stream"] = False
        _print_json(c.call("POST", path, body if body is not None else {}), out)
        return EXIT_OK
    status, headers, chunks = c.request("POST", path, body if body is not None else {}, stream=True)
    if status >= 400 or not headers.get("content-type", "").startswith("text/event-stream"):
        data = b"".join(chunks)
        if status < 400:
            raise bad_reply(f"an answer stream was expected, got {safe(headers.get('content-type', 'no type'))[:60]}")
        raise api_error(status, parse_json(data) if data else {})
    sources: list[dict] = []
    done: dict = {}
    for event, ev in sse_events(chunks):
        if event == "sources":
            sources = ev.get("sources", [])
            if ev.get("rewrite"):  # what a follow-up was searched as, before its answer
                from ragweedd.cli.ctl_text import say_rewrite

                say_rewrite(ev["rewrite"])
        elif event == "token":
            out.write(safe_text(ev.get("text", "")))
            out.flush()
        elif event == "error":
            err = ev.get("error", {})
            out.write("\n")
            hint = err.get("hint")
            raise CtlError(f"the answer failed: {safe(err.get('message', 'unknown error'))}", EXIT_ERROR,
                           {"error": err}, hint=hint if isinstance(hint, str) else None, action=err.get("action"))
        elif event == "done":
            done = ev
    out.write("\n")
    if not done:
        raise CtlError("the answer stream ended before it was complete (did ragweedd stop?)", EXIT_ERROR)
    # the done event's sources are the numbered ones the answer's [N] refer to (the first event lists
    # everything retrieved, before annotation and packing)
    _print_sources(done.get("sources") or sources, out)
    from ragweedd.cli.ctl_text import print_citation_checks, print_tree

    print_citation_checks(done, out)
    print_tree(done, out)
    if done.get("llm_setup"):  # guidance, not part of the answer: kept out of a pipe's data
        sys.stderr.write(f"note: {safe(done['llm_setup'])}\n")
    if done.get("finish_reason") == "max_tokens":
        out.write("\n(the answer was cut at max_tokens; continue with: "
                  f"ragweedctl ask --continue {safe(done.get('history_id'))})\n")
    if done.get("conversation_id"):
        from ragweedd.cli.ctl_text import say_turn

        say_turn(done)
    return EXIT_OK


def cmd_collections(c: Client, a: argparse.Namespace, out: Writer) -> int:
    res = c.call("GET", "/v1/collections")
    if a.json:
        _print_json(res, out)
        return EXIT_OK
    for col in res.get("items", []):
        out.write(f"{safe(col.get('name'))}: {', '.join(safe(p) for p in col.get('paths', []))}  "
                  f"({col.get('documents', 0)} documents)\n")
    return EXIT_OK


def cmd_add(c: Client, a: argparse.Namespace, out: Writer) -> int:
    paths = [os.path.abspath(os.path.expanduser(p)) for p in a.paths]
    res = c.call("POST", "/v1/collections", {"name": a.name, "paths": paths, "ignore": a.ignore or [],
                                              "topic": a.topic or ""})
    _print_json(res, out) if a.json else out.write(f"added collection {safe(a.name)}: {', '.join(map(safe, paths))}\n")
    return EXIT_OK


def _simple(method: str, suffix: str, done_msg: str) -> Callable[[Client, argparse.Namespace, Writer], int]:
    def run(c: Client, a: argparse.Namespace, out: Writer) -> int:
        res = c.call(method, f"/v1/collections/{path_segment(a.name)}{suffix}")
        _print_json(res, out) if a.json else out.write(done_msg.format(name=safe(a.name)) + "\n")
        return EXIT_OK
    return run


cmd_remove = _simple("DELETE", "", "removed collection {name} (your files are untouched)")
cmd_scan = _simple("POST", "/scan", "scan of {name} queued")
cmd_reanalyze = _simple("POST", "/reanalyze", "re-analysis of {name} queued")
cmd_rebuild_fts = _simple("POST", "/rebuild-fts", "keyword index rebuild of {name} queued")


def cmd_upload(c: Client, a: argparse.Namespace, out: Writer) -> int:
    try:
        with open(a.file, "rb") as f:
            data = f.read()
    except OSError as e:
        raise CtlError(f"cannot read {a.file}: {e.strerror}", EXIT_USAGE) from None
    name = a.name_as or os.path.basename(a.file)
    res = c.call("POST", f"/v1/collections/{path_segment(a.collection)}/documents" + query_string({"filename": name}),
                 raw=data)
    if not a.json:
        out.write(f"uploaded {safe(name)} to {safe(a.collection)} ({len(data)} bytes)\n")
        return EXIT_OK
    _print_json(res, out)
    return EXIT_OK


def cmd_docs(c: Client, a: argparse.Namespace, out: Writer) -> int:
    if a.doc_key:
        d = c.call("GET", f"/v1/documents/{path_segment(a.doc_key)}")
        if a.json:
            _print_json(d, out)
            return EXIT_OK
        out.write(f"{safe(d.get('doc_key'))}  {safe(d.get('state'))}  {safe(d.get('source_file'))}\n")
        if d.get("error"):
            out.write(f"  error: {safe(d['error'])}\n")
        for ch in d.get("chunks_detail", []):
            text = " ".join(str(ch.get("text", "")).split())
            place = _where({**ch, 'collection': d.get('collection'), 'filename': d.get('filename')})
            out.write(f"  #{safe(ch.get('chunk_idx'))} {place}: {safe(text[:160])}\n")
        return EXIT_OK
    res = c.call("GET", "/v1/documents" + query_string({"collection": a.collection, "state": a.state,
                                                "path_glob": a.path_glob, "offset": a.offset, "limit": a.limit}))
    if a.json:
        _print_json(res, out)
        return EXIT_OK
    for d in res.get("items", []):
        err = f"  ({safe(d['error'])})" if d.get("error") else ""
        out.write(f"{safe(d.get('doc_key'))}  {safe(d.get('state')):<10} {d.get('chunks', 0):>5} chunks  "
                  f"{safe(d.get('source_file'))}{err}\n")
    out.write(f"{len(res.get('items', []))} of {res.get('total', 0)} documents\n")
    return EXIT_OK


def cmd_history(c: Client, a: argparse.Namespace, out: Writer) -> int:
    from ragweedd.cli.ctl_threads import cmd_history as history

    return history(c, a, out)


def cmd_mcp(a: argparse.Namespace, err: TextIO) -> int:
    # The SDK (pydantic, starlette, anyio) costs ~0.5 s to import: only this command pays it.
    try:
        from ragweedd.cli.mcp_stdio import run_stdio
    except ImportError as e:
        raise CtlError(f"ragweedctl mcp needs the 'mcp' package ({e}); install it with `pip install 'mcp>=2.3'`",
                       EXIT_ERROR) from None
    if a.timeout is not None and not a.timeout > 0:
        raise CtlError(f"--timeout must be a positive number of seconds, not {a.timeout}", EXIT_USAGE)
    return run_stdio(_state_dir(a.state_dir), allow_writes=a.allow_writes, timeout=a.timeout, err=err)


def cmd_service(a: argparse.Namespace, out: TextIO) -> int:
    from ragweedd.cli import service

    try:
        return service.run(a.action, dry_run=a.dry_run, config=a.config, ragweedd=a.ragweedd,
                           state_dir=a.state_dir, as_json=a.json, out=out)
    except service.ServiceError as e:
        raise CtlError(e.message, e.exit_code, hint=e.hint) from None


# --------------------------------------------------------------------------- parser

def _fmt(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, width=HELP_WIDTH, max_help_position=30)


def _memoise_argparse_gettext() -> None:
    # argparse calls gettext ~50 times while these parsers are built, and every call searches the
    # locale directories again: ~20 ms, a fifth of the start-up budget. Same strings, memoised.
    import functools
    import gettext

    if not hasattr(argparse._, "cache_info"):  # type: ignore[attr-defined]
        argparse._ = functools.lru_cache(maxsize=None)(gettext.gettext)  # type: ignore[attr-defined]


def build_parser() -> argparse.ArgumentParser:
    _memoise_argparse_gettext()
    parser_class = UsageErrorParser
    common = parser_class(add_help=False, formatter_class=_fmt)
    # SUPPRESS: an option given before the command must not be reset by the sub-parser's default.
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print the daemon's JSON answer (for scripts and launchers)")
    common.add_argument("--state-dir", default=argparse.SUPPRESS, metavar="DIR",
                        help="where the daemon keeps its token and port files "
                             "(default: $RAGWEED_STATE_DIR or the OS state dir)")
    common.add_argument("--timeout", type=float, default=argparse.SUPPRESS, metavar="S",
                        help="give up when the whole request has not finished after S seconds "
                             "(default 5 for status, 600 for ask, 300 for upload, else 30)")
    filt = parser_class(add_help=False, formatter_class=_fmt)
    filt.add_argument("-c", "--collection", action="append", metavar="NAME",
                      help="only this collection (repeatable)").completer = "collections"  # type: ignore[attr-defined]
    filt.add_argument("--path-glob", metavar="GLOB", help="only files whose path matches")
    filt.add_argument("--type", metavar="EXT", help="only this file type, e.g. pdf")
    filt.add_argument("--doc", metavar="DOC_KEY", help="only this document")
    paging = parser_class(add_help=False, formatter_class=_fmt)
    paging.add_argument("--offset", type=int, default=None, metavar="N", help="skip the first N entries (default 0)")
    paging.add_argument("-n", "--limit", type=int, default=None, metavar="N",
                        help="list at most N entries (default 50)")

    p = parser_class(
        prog="ragweedctl", formatter_class=_fmt, parents=[common],
        description="Talk to the local ragweedd daemon (search, ask, manage collections).",
        epilog="exit codes: 0 ok, 1 daemon error, 2 bad request or usage, 3 daemon not running")
    p.add_argument("--version", action="version", version=f"ragweedctl {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, help: str, parents: Sequence[UsageErrorParser] = (),
            **kw: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help, parents=[common, *parents],
                              formatter_class=_fmt, **kw)

    s = add("status", "daemon status: collections, files by state, queue, embedder, problems")
    s.add_argument("--watch", action="store_true",
                   help="refresh the ingest progress (done/total, rate, ETA) until Ctrl-C")
    s.add_argument("--interval", type=float, default=2.0, metavar="S", help="seconds between refreshes (default 2)")
    s.add_argument("--count", type=positive_int, metavar="N", help="stop after N refreshes")
    s = add("ask", "ask a question; the answer streams, then its numbered sources", [filt])
    s.add_argument("query", nargs="*", help="the question")
    s.add_argument("--continue", dest="continue_id", metavar="HISTORY_ID",
                   help="continue an answer that was cut at max_tokens")
    s.add_argument("-f", "--follow-up", action="store_true",
                   help="ask in the last conversation (any face's): the question keeps its subject")
    s.add_argument("--conversation", metavar="ID",
                   help="ask in this conversation (`ragweedctl history --threads` lists them); "
                        "default: a new one")
    add_limit_option(s, "passages retrieved for the answer (default 10)", default=None)
    add_tree_option(s)
    s = add("search", "search without writing an answer", [filt])
    s.add_argument("query", nargs="+", help="the words or question to search for")
    add_limit_option(s, "results to print (default 10)", default=None)
    add("collections", "list collections")
    s = add("add", "add a collection of folders")
    s.add_argument("name", help="the new collection's name (letters, digits, '-', '_', '.')")
    s.add_argument("paths", nargs="+", metavar="PATH", help="folders (or files) the daemon watches for it")
    s.add_argument("--ignore", action="append", metavar="GLOB", help="ignore pattern (repeatable)")
    s.add_argument("--topic", help="what the collection is about")
    for name, help in (("remove", "forget a collection and its index (files stay)"),
                       ("scan", "reconcile a collection's folders now"),
                       ("reanalyze", "re-run cluster analysis of a collection"),
                       ("rebuild-fts", "rebuild a collection's keyword index")):
        add(name, help).add_argument("name", help="the collection").completer = "collections"  # type: ignore[attr-defined]
    s = add("upload", "copy a file into a collection's managed folder")
    s.add_argument("collection", help="the collection it goes into").completer = "collections"  # type: ignore[attr-defined]
    s.add_argument("file", help="the file to copy")
    s.add_argument("--name", dest="name_as", metavar="NAME", help="store it under this name")
    s = add("docs", "list documents, or show one with its chunks", [paging])
    s.add_argument("doc_key", nargs="?", help="show this document")
    s.add_argument("-c", "--collection", metavar="NAME",
                   help="only this collection's documents").completer = "collections"  # type: ignore[attr-defined]
    s.add_argument("--state", choices=["queued", "indexed", "failed", "skipped", "superseded"],
                   help="only documents in this state")
    s.add_argument("--path-glob", metavar="GLOB", help="only documents whose path matches, e.g. '*/notes/*.md'")
    s = add("history", "past searches, answers and conversations, or one in full", [paging])
    s.add_argument("history_id", nargs="?", metavar="ID",
                   help="show this entry in full, or this conversation (an id starting with 'c') turn by turn")
    s.add_argument("--threads", action="store_true", help="list the conversations, the last continued first")
    s.add_argument("--delete", metavar="CONVERSATION_ID", help="delete this conversation and all its turns")
    s = add("service", "install, uninstall or inspect the systemd user unit / launchd agent")
    s.add_argument("action", choices=["install", "uninstall", "status"], help="what to do")
    s.add_argument("--dry-run", action="store_true", help="print what would be done, change nothing")
    s.add_argument("--config", metavar="FILE", help="config file the service passes to ragweedd")
    s.add_argument("--ragweedd", metavar="PATH", help="ragweedd executable (default: next to this Python)")
    s = add("mcp", "MCP server on stdio for AI assistants, proxying to the daemon")
    s.add_argument("--allow-writes", action="store_true",
                   help="also offer add_collection, scan and upload (default: read-only tools)")
    add_open_parser(add)
    from ragweedd.cli.keys import add_parser as add_keys

    add_keys(add)
    s = add("completion", "print a shell completion script (bash, zsh or fish)")
    s.add_argument("shell", choices=["bash", "zsh", "fish"], help="the shell the script is for")
    add("man", "print the ragweedctl(1) man page (roff)")
    # for the completion scripts: the running daemon's collection names, one per line (no help: not
    # listed, and the generator leaves out names starting with "_")
    sub.add_parser("_collections", parents=[common], formatter_class=_fmt)
    hide_commands(sub)
    return p


COMMANDS = {
    "status": cmd_status, "ask": cmd_ask, "search": cmd_search, "collections": cmd_collections,
    "add": cmd_add, "remove": cmd_remove, "scan": cmd_scan, "reanalyze": cmd_reanalyze,
    "rebuild-fts": cmd_rebuild_fts, "upload": cmd_upload, "docs": cmd_docs, "history": cmd_history,
    "open": cmd_open,
}


COMPLETION_TIMEOUT = 0.5  # a TAB must not hang on a daemon that does not answer


def cmd_collection_names(a: argparse.Namespace, out: Writer) -> int:
    """``ragweedctl _collections``: names for shell completion; nothing (and 0) when no daemon runs,
    because a completion must never print an error into the user's command line."""
    try:
        res = Client(_state_dir(a.state_dir), timeout=COMPLETION_TIMEOUT).call("GET", "/v1/collections")
        names = [c.get("name") for c in res.get("items", [])]
    except (CtlError, OSError, ValueError, AttributeError, TypeError):
        return EXIT_OK
    out.write("".join(f"{n}\n" for n in names if isinstance(n, str) and n.isprintable() and " " not in n))
    return EXIT_OK


def cmd_local(a: argparse.Namespace, out: TextIO) -> int:
    """The commands that do not talk to the daemon: keys, completion, man."""
    if a.command == "keys":
        from ragweedd.cli import keys

        return keys.run(a, out)
    from ragweedd.cli.completion import run_generated

    return run_generated(build_parser(), a.command, getattr(a, "shell", None), a.json, out)


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    argv = sys.argv[1:] if argv is None else argv
    try:
        a = build_parser().parse_args(argv)
    except UsageError as e:
        return e.report(err, out, argv_wants_json(argv))
    a.json = getattr(a, "json", False)
    a.state_dir = getattr(a, "state_dir", None)
    a.timeout = getattr(a, "timeout", None)
    try:
        if a.command == "_collections":
            return cmd_collection_names(a, out)
        if a.command in ("service", "mcp", "keys", "completion", "man"):
            code = cmd_service(a, out) if a.command == "service" else cmd_mcp(a, err) if a.command == "mcp" \
                else cmd_local(a, out)
            out.flush()  # here, not at exit: a closed pipe is then caught below
            return code
        if a.timeout is not None and not a.timeout > 0:
            raise CtlError(f"--timeout must be a positive number of seconds, not {a.timeout}", EXIT_USAGE)
        timeout = a.timeout if a.timeout is not None else TIMEOUTS.get(a.command, DEFAULT_TIMEOUT)
        client = Client(_state_dir(a.state_dir), timeout=timeout)
        try:
            code = COMMANDS[a.command](client, a, out if a.json else SafeWriter(out))
        except (KeyError, TypeError, AttributeError, IndexError, ValueError) as e:
            # the reply parsed as JSON but is not the contract's shape
            raise bad_reply(f"{type(e).__name__} {str(e)[:80]}") from None
        out.flush()  # here, not at exit: a closed pipe is then caught below
        return code
    except CtlError as e:
        if a.json:
            try:
                if e.payload is not None:
                    _print_json(e.payload, out)
                else:  # a local error (keys, arguments checked after argparse): the same envelope
                    from ragweedd.errors import hint_for

                    print_json_error(out, e.code, e.message, hint_for("ctl", e.action, e.hint))
                out.flush()
            except BrokenPipeError:  # its reader is gone: the exit code still tells
                quiet_broken_pipe(out)
        err.write(f"ragweedctl: {safe_text(str(e))}\n")
        return e.exit_code
    except KeyboardInterrupt:
        err.write("\nragweedctl: interrupted\n")
        return 130
    except BrokenPipeError:
        return quiet_broken_pipe(out)
    except OSError as e:  # the connection broke while a body was being read
        err.write(f"ragweedctl: connection to ragweedd failed: {e}\n")
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
