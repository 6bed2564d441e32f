"""``ragweedd reembed [-c NAME ...]``: move a collection of a shared PostgreSQL store to the
configured ``embed.model``.

On the SQLite files a daemon makes that move by itself, without downtime (docs/embedders.md). A
shared collection's vectors are every machine's, so one daemon never replaces them on its own: it
refuses to start with a model the collection was not embedded with. This command, run once on one
machine while the daemons are stopped, records the configured model as the collection's embedder
and sets every stored chunk waiting for its vector; the daemons, started with that model, embed
them from the stored text (nothing is extracted again, and texts already in the shared embed cache
are not embedded again). Keyword search works throughout; vector search finds what is done so far.
"""

from __future__ import annotations

import json
from typing import Any

from ragweedd.config import Config
from ragweedd.errors import ConfigError, NotFoundError


def add_parser(sub: Any) -> None:
    r = sub.add_parser("reembed", help="set a shared (PostgreSQL) collection to be embedded again with embed.model")
    r.add_argument("-c", "--collection", action="append", metavar="NAME",
                   help="the collection (repeatable; default: every collection in the database)")
    from ragweedd.cli.options import add_verbose_option

    add_verbose_option(r)


def run(cfg: Config, args: Any) -> int:
    from ragweedd.chunk.context import index_embedder_id
    from ragweedd.embed.factory import make_embedder
    from ragweedd.services import open_stores
    from ragweedd.store.backends import is_shared
    from ragweedd.store.types import PRIMARY

    if not is_shared(cfg):
        raise ConfigError("reembed is for a shared PostgreSQL store; this configuration's store is the SQLite files",
                          hint="on SQLite the daemon moves to a changed [embed] model by itself: set it and "
                               "restart ragweedd (docs/embedders.md)")
    stores: Any = open_stores(cfg)
    embedder = make_embedder(cfg.embed_model, cfg)
    try:
        want, dim = index_embedder_id(embedder.id, cfg.chunk_context), int(embedder.dim)
        have = stores.indexed_collections()
        names = args.collection or have
        missing = sorted(set(names) - set(have))
        if missing:
            raise NotFoundError(f"collection '{missing[0]}' is not in {stores!r}",
                                hint=f"the database holds: {', '.join(have) or 'no collection yet'}")
        out: dict[str, Any] = {}
        for name in names:
            rag = stores.open_rag(name)
            try:
                known = rag.embedder(PRIMARY)
                if known is not None and known[0] == want:
                    rag.ensure_vector_index(dim)  # a build an earlier run could not finish
                    out[name] = {"embedder": want, "chunks": 0, "already": True}
                    continue
                if known is not None and known[0].partition("+")[2] != want.partition("+")[2]:
                    raise ConfigError(
                        f"collection '{name}' was embedded with {known[0]}: chunk_context differs from this "
                        f"configuration's ({want}), and the stored context lines are of the other format",
                        hint="set chunk_context back, or ingest the collection again from its files")
                out[name] = {"embedder": want, "chunks": rag.restart_vectors(want, dim), "already": False,
                             "was": known[0] if known else None}
            finally:
                rag.close()
    finally:
        stores.close()
        if hasattr(embedder, "close"):
            embedder.close()
    if args.json:
        print(json.dumps({"collections": out}))
        return 0
    for name, r in out.items():
        if r["already"]:
            print(f"{name}: already embedded with {r['embedder']}")
        else:
            print(f"{name}: {r['chunks']} chunks wait for {r['embedder']} vectors (were {r['was']}); "
                  "start the daemons with this [embed] model to embed them")
    return 0
