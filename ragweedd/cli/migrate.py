"""``ragweedd migrate --to postgresql://…``: copy this machine's SQLite data directory (the
``data_dir`` and ``state_dir`` of the configuration) into a PostgreSQL database with pgvector.

The SQLite files are only read, so the copy can run beside a daemon; what the daemon writes while
it runs is picked up by running the command again (it copies nothing twice). Afterwards set
``store`` to the same URI (docs/postgres.md).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from ragweedd.config import Config, _source_name, redact_dsn
from ragweedd.errors import ConfigError


def add_parser(sub: Any) -> None:
    m = sub.add_parser("migrate", help="copy the SQLite index, ingest state and history into PostgreSQL")
    m.add_argument("--to", required=True, metavar="URI",
                   help="the PostgreSQL database (postgresql://...), with pgvector")
    m.add_argument("--source-name", metavar="NAME",
                   help="source name of this machine's paths there (default: config source_name, else the host name)")
    from ragweedd.cli.options import add_verbose_option

    add_verbose_option(m)


def run(cfg: Config, args: Any) -> int:
    from ragweedd.services import open_copy_ends
    from ragweedd.store.backends import POSTGRES, SCHEMES, copy_between

    target = args.to
    if "://" not in target or SCHEMES.get(target.split("://", 1)[0].lower()) is not POSTGRES:
        raise ConfigError(f"migrate --to {redact_dsn(target)!r} is not a PostgreSQL URI",
                          hint="give postgresql://USER@HOST:PORT/DBNAME (see docs/postgres.md)")
    bad = _source_name(args.source_name or "")
    if bad:
        raise ConfigError(f"migrate --source-name {args.source_name!r} is not a source name", hint=f"give {bad}")
    src, dst = open_copy_ends(cfg, target, args.source_name or cfg.source_name)
    try:
        report = copy_between(src, dst, progress=lambda m: print(m, file=sys.stderr, flush=True))
    finally:
        dst.close()
        src.close()
    doc = {"to": redact_dsn(target), "source": dst.source, **report.as_dict()}
    if args.json:
        print(json.dumps(doc))
        return 0
    print(f"copied into {doc['to']} as source {dst.source!r}:")
    for name, c in report.collections.items():
        print(f"  {name}: {c['copied']} of {c['documents']} documents copied, {c['paths_linked']} paths linked,"
              f" {c['chunks']} chunks there")
    print(f"  ingest state: {report.files} files; embed cache: {report.embed_cache}; history: {report.history}")
    print(f"now set store = \"{redact_dsn(target)}\" in the configuration (password from ~/.pgpass)")
    return 0
