"""The ragweedd command: run the daemon, or one-shot ingest / search / ask / eval / doctor."""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragweedd import __version__
from ragweedd.config import Config
from ragweedd.errors import RagweedError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from ragweedd.config import KeySpec
    from ragweedd.embed.base import Embedder
    from ragweedd.services import Services
    from ragweedd.store.protocols import StoreBackend


def build_parser() -> argparse.ArgumentParser:
    from ragweedd.cli.exits import UsageErrorParser
    from ragweedd.cli.options import add_limit_option, add_tree_option, add_verbose_option, hide_commands

    parser_class = UsageErrorParser
    common = parser_class(add_help=False)
    # SUPPRESS: --json given before the command must not be reset by the sub-parser's default
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="machine-readable output: one JSON document on stdout (errors too)")
    p = parser_class(prog="ragweedd", description="Local document indexer and question-answering daemon.",
                     parents=[common],
                     epilog="exit codes: 0 ok, 1 failure, 2 bad configuration or request (unknown collection "
                            "too), 130 interrupted")
    p.add_argument("--config", metavar="FILE",
                   help="TOML config file (default: ~/.config/ragweedd/config.toml if present)")
    p.add_argument("--version", action="version", version=f"ragweedd {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    _add = sub.add_parser

    def add_parser(name: str, **kw: Any) -> argparse.ArgumentParser:
        return _add(name, parents=[common], **kw)

    sub.add_parser = add_parser  # type: ignore[method-assign,assignment]  # every command takes --json

    r = sub.add_parser("run", help="start the daemon (watch, ingest, serve the API)")
    r.add_argument("--allow-remote", action="store_true", help="permit a non-loopback listen address")

    i = sub.add_parser("ingest", help="ingest files or folders once into a collection, then exit")
    i.add_argument("paths", nargs="*", help="files or folders (default: the collection's configured paths)")
    i.add_argument("--collection", "-c", required=True, metavar="NAME",
                   help="the collection to ingest into (created if it does not exist)"
                   ).completer = "collections"  # type: ignore[attr-defined]
    i.add_argument("--force", action="store_true", help="re-extract even files whose content is unchanged")
    i.add_argument("--rebuild-fts", action="store_true", help="backfill the keyword index from stored chunk text")
    i.add_argument("--verbose", "-v", action="store_true",
                   help="also print the info log (a line per file; on a terminal above the progress bar)")

    s = sub.add_parser("search", help="search the index once and print ranked chunks")
    s.add_argument("query", help="the words or question to search for")
    s.add_argument("--collection", "-c", action="append", metavar="NAME",
                   help="collection to search (repeatable; default all)").completer = "collections"  # type: ignore[attr-defined]
    add_limit_option(s, "results to print (default 10)")
    s.add_argument("--mode", choices=("hybrid", "dense", "keyword"), default="hybrid",
                   help="retrieval kind: hybrid (default: vectors and keywords), dense (vectors only) or "
                        "keyword (FTS5 only)")
    add_verbose_option(s)

    a = sub.add_parser("ask", help="answer a question once (no daemon needed): answer, then numbered sources")
    a.add_argument("query", nargs="*", help="the question")
    a.add_argument("--collection", "-c", action="append", metavar="NAME",
                   help="collection to search (repeatable; default all)").completer = "collections"  # type: ignore[attr-defined]
    add_limit_option(a, "passages retrieved for the answer (default 10)")
    a.add_argument("--continue", dest="continue_id", metavar="HISTORY_ID",
                   help="continue an answer that was cut at max_tokens")
    a.add_argument("-f", "--follow-up", action="store_true",
                   help="ask in the last conversation: the question keeps its subject")
    a.add_argument("--conversation", metavar="ID", help="ask in this conversation (default: a new one)")
    add_tree_option(a)
    add_verbose_option(a)

    from ragweedd.cli.evaluate import add_parser as add_eval_parser

    add_eval_parser(sub)
    from ragweedd.cli.migrate import add_parser as add_migrate_parser

    add_migrate_parser(sub)
    from ragweedd.cli.reembed import add_parser as add_reembed_parser

    add_reembed_parser(sub)
    add_verbose_option(sub.add_parser("check-config", help="validate the configuration and print the effective values"))
    add_verbose_option(sub.add_parser("doctor",
                                      help="list every format, its extractor and whether its tools are installed"))
    c = sub.add_parser("completion", help="print a shell completion script (bash, zsh or fish)")
    c.add_argument("shell", choices=["bash", "zsh", "fish"], help="the shell the script is for")
    sub.add_parser("man", help="print the ragweedd(1) man page (roff)")
    # for the completion scripts: the collection names of the config and of the data dir (no help:
    # not listed, and the generator leaves out names starting with "_")
    _add("_collections", parents=[common])
    hide_commands(sub)
    _suppress_json_defaults(p)
    return p


def _suppress_json_defaults(parser: argparse.ArgumentParser) -> None:
    """A sub-command's own ``--json`` (eval's) must not reset one given before it to False."""
    for act in parser._actions:
        if act.dest == "json":
            act.default = argparse.SUPPRESS
        if isinstance(act, argparse._SubParsersAction):
            for sp in act.choices.values():
                _suppress_json_defaults(sp)


def main(argv: list[str] | None = None) -> int:
    from ragweedd.cli.exits import UsageError, argv_wants_json, exit_code_for, quiet_broken_pipe

    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as e:
        return e.report(sys.stderr, sys.stdout, argv_wants_json(argv))
    args.json = getattr(args, "json", False)
    try:
        _check_names(args)
        code = _dispatch(args)
        sys.stdout.flush()  # here, not at exit: a closed pipe is then caught below
        return code
    except RagweedError as e:
        if args.json:
            _json_error({"error": e.to_dict()})
        print(f"ragweedd: {e.say('cli')}", file=sys.stderr)
        # the same table as ragweedctl's: "not found" is the request's fault (2) in both
        return exit_code_for(e.code, e.http_status)
    except KeyboardInterrupt:
        if args.json:
            _json_error({"error": {"code": "interrupted", "message": "interrupted"}})
        return 130
    except BrokenPipeError:
        return quiet_broken_pipe()


def _json_error(doc: object) -> None:
    """The error object on stdout, unless its reader is gone: then the exit code still tells."""
    from ragweedd.cli.exits import quiet_broken_pipe

    try:
        _json_out(doc)
    except BrokenPipeError:
        quiet_broken_pipe()


def _check_names(args: argparse.Namespace) -> None:
    """Collection names given to a one-shot command follow the daemon's rule before anything runs
    (ragweedd.paths also refuses them where a collection's path is built)."""
    from ragweedd.paths import check_collection_name

    names = getattr(args, "collection", None)
    for name in [names] if isinstance(names, str) else names or []:
        check_collection_name(name)


def _json_out(doc: object) -> None:
    json.dump(doc, sys.stdout, ensure_ascii=False, default=str)
    sys.stdout.write("\n")
    sys.stdout.flush()


def _dispatch(args: argparse.Namespace) -> int:
    from ragweedd.cli import common

    if args.cmd in ("completion", "man"):  # no configuration needed
        return _generated(args)
    if args.cmd == "_collections":
        return _collection_names(args)
    cfg, chosen = common.load_noted(args.config)
    from ragweedd.logging import at_least, configure

    if args.cmd == "run":
        configure(cfg.log_level, stream=sys.stdout)
    elif getattr(args, "verbose", False):
        configure(cfg.log_level, stream=sys.stderr)
    else:  # a one-shot command: warnings and errors only, one short line each
        configure(at_least(cfg.log_level, "warning"), stream=sys.stderr, brief=True)
    if args.cmd == "check-config":
        return _check_config(cfg, args.json, chosen)
    if args.cmd == "ingest":
        return _ingest(cfg, args)
    if args.cmd == "search":
        return _search(cfg, args)
    if args.cmd == "doctor":
        return _doctor(cfg, args.json)
    if args.cmd == "ask":
        from ragweedd.cli.ask import run

        return run(cfg, args)
    if args.cmd == "eval":
        from ragweedd.cli.evaluate import run as run_eval

        return run_eval(cfg, args)
    if args.cmd == "migrate":
        from ragweedd.cli.migrate import run as run_migrate

        return run_migrate(cfg, args)
    if args.cmd == "reembed":
        from ragweedd.cli.reembed import run as run_reembed

        return run_reembed(cfg, args)
    if args.cmd == "run":
        from ragweedd.daemon import run_daemon

        install_crash_reporting()
        return run_logged(lambda: run_daemon(cfg, allow_remote=args.allow_remote, banner_json=args.json))
    raise AssertionError(args.cmd)


def _collection_names(args: argparse.Namespace) -> int:
    """Names for shell completion: the config's collections and those ingested into the data dir.
    A completion must never print an error into the user's command line: nothing on failure."""
    from ragweedd.cli import common
    from ragweedd.paths import Paths, valid_collection_name

    try:
        cfg = common.load(args.config)
        names = set(cfg.collections)
        root = Paths.from_config(cfg).collections
        if root.is_dir():
            names |= {p.name for p in root.iterdir() if (p / "rag.sqlite3").exists()}
    except (RagweedError, OSError):
        return 0
    sys.stdout.write("".join(f"{n}\n" for n in sorted(names) if valid_collection_name(n)))
    return 0


def _generated(args: argparse.Namespace) -> int:
    from ragweedd.cli.completion import run_generated

    return run_generated(build_parser(), args.cmd, getattr(args, "shell", None), args.json, sys.stdout)


def install_crash_reporting() -> None:
    """The daemon must never end without a trace.

    - faulthandler: a fatal signal (SIGSEGV in a native extension, SIGABRT...) prints every
      thread's Python stack to stderr (the journal); SIGUSR1 prints them without stopping, for a
      daemon that seems stuck;
    - threading.excepthook: an exception that ends any thread is logged (``thread_crashed``, with
      the thread's name and traceback) instead of only going to stderr;
    - SIGHUP (its terminal closed) stops the daemon the way SIGTERM does, with a log line, instead
      of killing it silently by default.
    """

    from ragweedd.logging import get_logger

    log = get_logger("ragweedd")
    faulthandler.enable(file=sys.stderr, all_threads=True)
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True, chain=False)

    def thread_crashed(a: threading.ExceptHookArgs) -> None:
        if a.exc_type is SystemExit:
            return
        log.error("thread_crashed", thread=getattr(a.thread, "name", None),
                  error=f"{a.exc_type.__name__}: {a.exc_value}",
                  exc_info=(a.exc_type, a.exc_value, a.exc_traceback))

    threading.excepthook = thread_crashed
    if hasattr(signal, "SIGHUP"):
        def hangup(signum: int, frame: object) -> None:
            log.warning("daemon_signal", signal="SIGHUP", action="stopping as for SIGTERM")
            os.kill(os.getpid(), signal.SIGTERM)

        signal.signal(signal.SIGHUP, hangup)


def run_logged(run: Callable[[], int]) -> int:
    """``run()`` with its end in the log whatever it is: a return code, an error, an exception."""
    from ragweedd.logging import get_logger

    log = get_logger("ragweedd")
    try:
        code = run()
    except RagweedError as e:
        log.error("daemon_exit", code=e.exit_code, reason=str(e))
        raise
    except KeyboardInterrupt:
        log.warning("daemon_exit", code=130, reason="interrupted")
        raise
    except BaseException as e:
        log.critical("daemon_exit_unexpected", error=f"{type(e).__name__}: {e}", exc_info=True)
        raise
    log.info("daemon_exit", code=code)
    return code


def _check_config(cfg: Config, as_json: bool = False, chosen: str = "") -> int:
    from ragweedd.config import KEYS

    if as_json:
        values: dict = {}
        for k in sorted(KEYS, key=lambda k: (k.section, k.name)):
            (values.setdefault(k.section, {}) if k.section else values)[k.name] = _shown(k, cfg)
        _json_out({"ok": True, "source": str(cfg.source), "chosen": chosen, "config": values,
                   "collections": {n: {"paths": list(c.paths), "ignore": list(c.ignore)}
                                   for n, c in cfg.collections.items()}})
        return 0
    print(f"# configuration OK (source: {cfg.source}; {chosen})" if chosen else
          f"# configuration OK (source: {cfg.source})")
    section = None
    for k in sorted(KEYS, key=lambda k: (k.section, k.name)):
        if k.section != section:
            section = k.section
            if section:
                print(f"\n[{section}]")
        print(f"{k.name} = {_toml(_shown(k, cfg))}")
    for name, c in cfg.collections.items():
        print(f"\n[collections.{name}]\npaths = {_toml(list(c.paths))}\nignore = {_toml(list(c.ignore))}")
    return 0


def _shown(k: KeySpec, cfg: Config) -> str:
    """A key's value as check-config prints it: API keys only as whether they are set (the output
    lands in terminals, bug reports and CI logs)."""
    from ragweedd.config import redact_dsn

    v = getattr(cfg, k.attr)
    return ("<set>" if v else "") if k.attr.endswith("_api_key") else redact_dsn(v)


def _toml(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(v)


def _ingest(cfg: Config, args: argparse.Namespace) -> int:
    from ragweedd.cli import common
    from ragweedd.daemon import data_writer_lock
    from ragweedd.errors import AlreadyRunningError, RequestError
    from ragweedd.services import open_oneshot

    coll = cfg.collections.get(args.collection)
    roots = common.resolve_inputs(args.paths) if args.paths else [Path(p) for p in (coll.paths if coll else [])]
    if not roots and not args.rebuild_fts:
        raise RequestError(f"nothing to ingest into '{args.collection}'",
                           hint="pass PATH arguments or declare [collections." + args.collection + "] paths")
    services = open_oneshot(cfg)
    # A running daemon is the one writer of this data directory: writing beside it would leave
    # two copies of the index files, so the daemon is given the work (cli/handover.py). A daemon
    # this user cannot reach (another state dir) is named in the lock's error.
    writer = data_writer_lock(services.paths)
    try:
        writer.acquire()
    except AlreadyRunningError:
        services.close()
        daemon = common.running_daemon(str(services.paths.state))
        if daemon is None or str(daemon["pid"]) != _lock_holder(services.paths.data / "writer.lock"):
            raise
        return _handed_over(daemon, str(services.paths.state), args, roots)
    except Exception:
        services.close()
        raise
    try:
        if args.rebuild_fts:
            rag = services.stores.open_rag(args.collection)
            try:
                n = rag.rebuild_fts()
            finally:
                rag.close()
            if args.json:
                _json_out({"collection": args.collection, "rebuilt_fts_chunks": n})
            else:
                print(f"rebuilt keyword index of '{args.collection}': {n} chunks")
            return 0
        if coll is None:
            _record_collection(services.stores, args.collection, roots)
        return _ingest_files(services, args, roots, coll.ignore if coll else ())
    finally:
        services.close()
        writer.release()


def _record_collection(stores: StoreBackend, name: str, roots: list[Path]) -> None:
    """A collection made by a one-shot ingest (not in the config) is recorded where the daemon
    keeps the collections added at run time, so the daemon serves it and keeps it in step: folders
    are watched, files given one by one are checked by its reconciliation scans. What is given adds
    to what was recorded before."""
    db = stores.open_ingest()
    try:
        known = {n: (paths, ignore, topic) for n, paths, ignore, topic in db.run_time_collections()}
        paths, ignore, topic = known.get(name, ([], [], ""))
        folders = list(dict.fromkeys([*paths, *(str(r) for r in roots)]))
        if name not in known or folders != paths:
            db.save_collection(name, folders, ignore, topic)
    finally:
        db.close()


def _lock_holder(lock_file: Path) -> str:
    try:
        return lock_file.read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def _handed_over(daemon: dict[str, Any], state_dir: str, args: argparse.Namespace, roots: list[Path]) -> int:
    from ragweedd.cli.ctl_http import CtlError
    from ragweedd.cli.handover import hand_over, rebuild_fts

    try:
        if args.rebuild_fts:
            return rebuild_fts(state_dir, args.collection, args.json)
        return hand_over(daemon, state_dir, args.collection, roots, args.force, args.json)
    except CtlError as e:
        if args.json:
            _json_error(e.payload or {"error": {"code": "daemon_error", "message": str(e)}})
        print(f"ragweedd: {e.say('cli')}", file=sys.stderr)
        return e.exit_code


def _ingest_files(services: Services, args: argparse.Namespace, roots: list[Path], ignore: Sequence[str]) -> int:
    from ragweedd.cli.progress import Bar
    from ragweedd.files.ignore import walk_files
    from ragweedd.ingest_line import oneshot_line

    cfg = services.cfg
    # As in the daemon, files are published as they are extracted and the embedding stage's thread
    # computes their vectors meanwhile, so extraction and embedding overlap.
    line = oneshot_line(services, args.collection)
    pipe, vectorizer, passes = line.pipeline, line.vectorizer, line.vectorizer.passes
    counts: dict[str, int] = {}
    chunks = 0
    problems: list[dict] = []
    t0 = time.monotonic()
    try:
        _refuse_other_embedder(services, pipe.embedder, args.collection, cfg)
        vectorizer.start()
        # the whole list first, so the progress bar knows its total (names only: cheap next to extraction)
        todo = [(f, root if root.is_dir() else root.parent) for root in roots for f in walk_files(root, ignore)]
        bar = Bar("ingest", len(todo), sys.stderr)
        if bar.enabled:
            from ragweedd.logging import at_least, configure

            # On a terminal the bar is the progress: a line per file would push it off the screen, so
            # only warnings and errors are printed (above the bar), unless --verbose asks for them all.
            # Through a pipe or into a file the bar is off and the log keeps its line per file.
            configure(cfg.log_level if args.verbose else at_least(cfg.log_level, "warning"),
                      stream=bar.log_stream(), brief=not args.verbose)
        try:
            for n, (f, base) in enumerate(todo, 1):
                out = pipe.ingest_file(args.collection, f, base, force=args.force)
                vectorizer.notify(args.collection)
                counts[out.status] = counts.get(out.status, 0) + 1
                chunks += out.chunks if out.status == "indexed" else 0
                if out.status in ("failed", "skipped"):
                    problems.append({"status": out.status, "path": str(out.path), "error": out.error})
                    bar.clear()
                    print(f"{out.status}: {out.path}: {out.error}", file=sys.stderr)
                bar.update(n, force=n == len(todo))
            bar.close()
            embed_error = vectorizer.drain()
        finally:
            bar.close()
            vectorizer.stop()
        embedded = vectorizer.sent
        waiting = sum(v[0] for v in vectorizer.summary.values())
        # Keep the collection's HNSW files in step with what was just stored, as the daemon does (a
        # server store indexes its vectors itself: no index here).
        if line.index is not None:
            line.index.sync(args.collection)
    finally:
        line.close()
    dt = time.monotonic() - t0
    degraded = passes.degraded()
    code = 1 if embed_error is not None or waiting or counts.get("failed") else 0
    if args.json:
        _json_out({"collection": args.collection, "files": counts, "new_chunks": chunks, "embedded": embedded,
                   "seconds": round(dt, 3), "problems": problems, "chunks_without_vectors": waiting,
                   "embed_error": None if embed_error is None else str(embed_error), "warnings": degraded,
                   "ok": code == 0})
    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    if not args.json:
        print(f"ingested into '{args.collection}': {summary or 'no files'}; {chunks} new chunks, "
              f"{embedded} embedded, {dt:.1f} s")
    if embed_error is not None or waiting:
        print(f"error: {waiting} chunks of '{args.collection}' have no vector yet (the embedder failed: "
              f"{embed_error}); keyword search finds them, dense search does not. Fix the embedder "
              f"(embed.model) and run this command again, or start the daemon: either computes them.",
              file=sys.stderr)
        return 1
    for problem in degraded:
        print(f"warning: {problem}", file=sys.stderr)
    return code


def _refuse_other_embedder(services: Services, embedder: Embedder, collection: str, cfg: Config) -> None:
    """Vectors of two models (or of two input formats) never mix in one collection: refuse before
    anything is written."""
    from ragweedd.chunk.context import index_embedder_id
    from ragweedd.errors import RequestError
    from ragweedd.store.types import PRIMARY

    if not services.stores.has_rag(collection):
        return
    rag = services.stores.open_rag(collection, readonly=True)
    try:
        known = rag.embedder(PRIMARY)
    finally:
        rag.close()
    want = index_embedder_id(embedder.id, cfg.chunk_context)
    if known is not None and known[0] != want:
        raise RequestError(
            f"collection '{collection}' was embedded with {known[0]}, but embed.model and chunk_context "
            f"give {want}",
            hint="ingest with the collection's model, or start the daemon: it builds the new model's "
                 "vectors beside the old ones and switches when they are complete (embed.migrate)")


def _search(cfg: Config, args: argparse.Namespace) -> int:
    from ragweedd.cli import common
    from ragweedd.services import open_oneshot

    services = open_oneshot(cfg)
    try:
        res = asyncio.run(services.search_async(args.query, args.collection, args.limit, mode=args.mode))
    finally:
        services.close()
    common.print_hits(res["results"], args.json, {"retrieval_meta": res.get("retrieval_meta")})
    return 0


def _doctor(cfg: Config, as_json: bool = False) -> int:
    from ragweedd.extract.doctor import report

    rows = report(cfg)
    if as_json:
        _json_out({"ok": all(r["ok"] for r in rows), "formats": rows})
        return 0
    bad = 0
    for r in rows:
        missing = ", ".join(f"{m['name']} (install {m['package']})" for m in r.get("missing", []))
        mark = "ok " if r["ok"] else "MISSING"
        bad += 0 if r["ok"] else 1
        print(f"{mark:8s} {r['format']:<12s} {r['extractor']:<16s} {' '.join(r['extensions'])}"
              + (f"  -> {missing}" if missing else ""))
    return 0
