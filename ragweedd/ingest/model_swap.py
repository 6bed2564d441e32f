"""Changing ``embed.model`` without downtime (DESIGN §6).

When the configured model differs from the one a collection's vectors were made by, the daemon
does not drop the collection: it keeps serving with the old model -- its primary vectors, their
index, and the old model to embed queries -- while the embedding stage gives every stored chunk a
vector of the new model beside them (the space ``MIGRATION``, ragweedd/store/sqlite/rag_swap.py). New
files get both. When every collection has all its new vectors the daemon switches, all collections
at once: the running core stops, ``prepare`` puts each collection's new vectors in place of the
old ones (one transaction each; the indexes are rebuilt from them), and a core on the new model
starts. A query is thus always embedded by the model whose vectors it searches.

Chunks are not extracted again: the embedding input is rebuilt from each chunk's stored text and
context line, exactly what the old model read. What is needed, else the collection is indexed again
from its files as before (``Core._reindex_if_embedder_changed``), with the reason in the log:

- ``embed.migrate`` is on (the default);
- only the model changed, not ``chunk_context`` or its format (the stored context lines are those
  of the old format);
- all collections that need it move from one and the same old model, and that model can still be
  loaded (for an Ollama model: the server still has the same weights).

A kill -9 at any point resumes: the new vectors are written a batch at a time, and a start that
finds every collection complete makes the switch before serving.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ragweedd.logging import get_logger

if TYPE_CHECKING:
    from ragweedd.config import Config
    from ragweedd.embed.base import Embedder
    from ragweedd.paths import Paths
    from ragweedd.store.protocols import DataDirStores

log = get_logger("ragweedd.ingest")


@dataclass
class Migration:
    """The move of this daemon's collections to the configured model (the extra vector space the
    embedding stage fills, in the shape of ragweedd.embed.passes.Pass)."""

    old_id: str  # what the collections' vectors are made by now (model and input format)
    embedder: Embedder | None  # the configured (new) model; None while it cannot be loaded (blocked)
    index_id: str  # what the new vectors are recorded as made by
    dim: int
    spec: str
    space: str = "next"
    key: str = "embed.model"
    problem: str | None = None
    ready: bool = False  # every collection has all its new vectors: the switch is due
    owned: bool = False  # the new model was made for this core, which closes it at its stop
    # The new model could not be loaded at the start (its server down, a model not pulled): nothing
    # is built, the old model serves, and the core tries the new model again every embed.retry_s;
    # ``reloaded`` once it loads (``embedder`` is then that model): the daemon starts a core with it.
    blocked: bool = False
    reloaded: bool = False
    vectors: dict[str, int] = field(default_factory=dict)  # collection -> new vectors stored
    missing: dict[str, int] = field(default_factory=dict)  # collection -> chunks still without one

    def info(self) -> dict[str, Any]:
        """The status entry (``contract.EmbedMigration``)."""
        vectors, missing = dict(self.vectors), dict(self.missing)  # the embedding stage writes them
        done, todo = sum(vectors.values()), sum(missing.values())
        return {"old_embedder_id": self.old_id, "new_embedder_id": self.index_id, "model": self.spec, "dim": self.dim,
                "state": "blocked" if self.blocked else (
                    "failed" if self.problem else ("switching" if self.ready else "embedding")),
                "vectors": done, "pending_chunks": todo,
                "percent": round(100.0 * done / (done + todo), 1) if done + todo else 100.0,
                "collections": {n: {"vectors": v, "pending_chunks": missing.get(n, 0)}
                                for n, v in sorted(vectors.items())},
                "problem": self.problem}


def spec_of(embedder_id: str) -> str | None:
    """The ``embed.model`` value that makes the embedder recorded as ``embedder_id`` (the input
    format suffix removed), or None when the id names no known form."""
    from ragweedd.embed.factory import LOCAL_MODELS

    base = embedder_id.split("+", 1)[0]
    kind, _, rest = base.partition(":")
    name, _, tag = rest.partition("@")
    if kind == "local":
        variant = tag.split("-", 1)[0]
        for model, v in LOCAL_MODELS.items():
            if v == variant and name == "all-minilm-l6-v2":
                return f"local:{model}"
        return None
    if kind in ("ollama", "hash") and name:
        return f"{kind}:{name}"
    return None


def _suffix(index_id: str) -> str:
    return index_id.partition("+")[2]


def daemon_collections(cfg: Config, stores: DataDirStores) -> list[str]:
    """The collections a daemon core serves (those of the config and those added at run time),
    as ragweedd.watch.collections builds them: a folder of a collection no longer served is no
    part of a move."""
    db = stores.open_ingest()
    try:
        return sorted(set(cfg.collections) | {row[0] for row in db.run_time_collections()})
    finally:
        db.close()


def prepare(cfg: Config, paths: Paths, embedder: Embedder,
            names: list[str] | None = None, *, stores: DataDirStores) -> tuple[Embedder, Migration | None]:
    """Before a daemon core is built: finish a switch that is due, cancel moves no longer wanted,
    and decide with which model the core serves. ``names``: the collections it serves (default:
    every collection folder). Returns (the serving embedder, the migration or None). Never raises
    for a migration it cannot do: the collections are then indexed again from their files, as
    without this feature."""
    from ragweedd.chunk.context import index_embedder_id
    from ragweedd.store.types import MIGRATION, PRIMARY

    want = index_embedder_id(embedder.id, cfg.chunk_context)
    state: dict[str, tuple[str | None, str | None]] = {}
    fresh: set[str] = set()  # collections whose move starts now
    for name in stores.indexed_collections():
        if names is not None and name not in names:
            continue
        rag = stores.open_rag(name)
        try:
            have, nxt = rag.embedder(PRIMARY), rag.embedder(MIGRATION)
            if nxt is not None and (nxt[0] != want or (have is not None and have[0] == want)):
                gone = rag.cancel_model_swap()
                log.info("model_swap_cancelled", collection=name, was_moving_to=nxt[0], configured=want,
                         vectors_dropped=gone)
                nxt = None
            if have is not None and have[0] != want and nxt is None:
                # the move's target is recorded at once (a collection without chunks is then
                # complete); a move that turns out impossible drops the collection's data anyway
                rag.reset_pass(MIGRATION, want, int(embedder.dim))
                fresh.add(name)
                nxt = (want, int(embedder.dim))
            state[name] = (have[0] if have else None, nxt[0] if nxt else None)
        finally:
            rag.close()
        if state[name][1] is None:
            _drop_index_files(paths, name)  # of a cancelled move, or left by a kill after a switch
    moving = {n: (have_id, next_id) for n, (have_id, next_id) in state.items()
              if have_id is not None and have_id != want}
    if not moving:
        return embedder, None
    if all(s[1] == want for s in moving.values()) and all(_complete(stores, n) for n in moving):
        for name in sorted(moving):
            _switch(cfg, paths, stores, name)
            log.info("model_swapped", collection=name, was=moving[name][0], now=want)
        return embedder, None
    why = _refusal(cfg, moving, state, want)
    old_id = next(iter(moving.values()))[0]
    if why is None:
        try:
            from ragweedd.embed.factory import make_embedder

            old = make_embedder(spec_of(old_id) or "", cfg)
            if index_embedder_id(old.id, cfg.chunk_context) != old_id:
                why = f"the old model now loads as {old.id}, not as the {old_id} the vectors were made by"
        except Exception as e:  # noqa: BLE001 - whatever stops the old model: index again as before
            why = f"the old model {old_id} cannot be loaded to serve meanwhile ({e})"
    if why is not None:
        log.warning("model_swap_not_possible", collections=sorted(moving), configured=want, reason=why,
                    action="the collections are indexed again from their files")
        return embedder, None
    m = Migration(old_id=old_id, embedder=embedder, index_id=want, dim=int(embedder.dim), spec=cfg.embed_model)
    for name in moving:  # status shows the work ahead before the embedding stage has looked
        rag = stores.open_rag(name, readonly=True)
        try:
            done, total = rag.swap_progress()
        finally:
            rag.close()
        m.vectors[name], m.missing[name] = done, total - done
    log.info("model_swap_started", collections=sorted(moving), was=old_id, now=want,
             resumed=sorted(n for n in moving if n not in fresh))
    return old, m


def blocked(cfg: Config, stores: DataDirStores, error: Exception,
            names: list[str] | None = None) -> tuple[Embedder, Migration] | None:
    """The configured model cannot be loaded (``error``) at a daemon's start. When the collections'
    vectors were made by another model that can still serve (a move just asked for, or one under
    way), the daemon starts with that old model and a blocked migration: searches and new files
    work as before, status says why the move waits and how to fix it, and the core tries the new
    model again (``Migration.reloaded``). Returns (the old model, the migration), or None when no
    old model can serve (a fresh data directory, the old model unavailable too, collections of
    different models, a chunk_context change): the start then fails with ``error`` as before.
    Reads only: what a move needs is recorded once the new model loads (``prepare``)."""
    from ragweedd.chunk.context import index_embedder_id
    from ragweedd.embed.factory import make_embedder
    from ragweedd.store.types import MIGRATION, PRIMARY

    state: dict[str, tuple[str, tuple[str, int] | None]] = {}
    for name in stores.indexed_collections():
        if names is not None and name not in names:
            continue
        rag = stores.open_rag(name, readonly=True)
        try:
            have, nxt = rag.embedder(PRIMARY), rag.embedder(MIGRATION)
        finally:
            rag.close()
        if have is not None:
            state[name] = (have[0], nxt)
    olds = {s[0] for s in state.values()}
    if len(olds) != 1:
        return None
    old_id = next(iter(olds))
    spec = spec_of(old_id)
    if spec is None or spec == cfg.embed_model or _suffix(old_id) != _suffix(index_embedder_id("", cfg.chunk_context)):
        return None
    old = None
    try:
        old = make_embedder(spec, cfg)
        same = index_embedder_id(old.id, cfg.chunk_context) == old_id and int(old.dim) > 0
    except Exception:  # noqa: BLE001 - the old model cannot serve either: the start fails as before
        same = False
    if not same or old is None:
        if old is not None and hasattr(old, "close"):
            old.close()
        return None
    # a move under way to this very model shows its progress; otherwise nothing is built yet
    targets = {s[1] for s in state.values() if s[1] is not None and spec_of(s[1][0]) == cfg.embed_model}
    index_id, dim = next(iter(targets)) if len(targets) == 1 else ("", 0)
    m = Migration(old_id=old_id, embedder=None, index_id=index_id, dim=dim, spec=cfg.embed_model, blocked=True)
    m.problem = waiting_problem(cfg, m, error)
    for name, (_, nxt) in state.items():
        rag = stores.open_rag(name, readonly=True)
        try:
            done, total = rag.swap_progress()
        finally:
            rag.close()
        if nxt is None or nxt[0] != index_id:
            done = 0
        m.vectors[name], m.missing[name] = done, total - done
    log.warning("model_swap_blocked", collections=sorted(state), configured=cfg.embed_model, serving=old_id,
                error=_message(error),
                action=f"the old model serves; the new one is tried again every {cfg.embed_retry_s:g} s")
    return old, m


def _message(error: Exception) -> str:
    return getattr(error, "message", None) or f"{type(error).__name__}: {error}"


def waiting_problem(cfg: Config, m: Migration, error: Exception) -> str:
    """What status says under ``degraded`` while a blocked move waits for its new model."""
    hint = getattr(error, "hint", None)
    return (f"the change of embed.model to {cfg.embed_model!r} waits: {_message(error)}"
            f"{f' ({hint})' if hint else ''}; searches and new files keep using the old model {m.old_id}; "
            f"the new model is tried again every {cfg.embed_retry_s:g} s and the move "
            f"{'goes on where it stopped' if m.index_id else 'starts'} once it loads")


def _refusal(cfg: Config, moving: dict[str, tuple[str, str | None]],
             state: dict[str, tuple[str | None, str | None]], want: str) -> str | None:
    if not getattr(cfg, "embed_migrate", True):
        return "embed.migrate is off"
    olds = {s[0] for s in moving.values()}
    if len(olds) > 1:
        return f"the collections were embedded by different models ({', '.join(sorted(olds))})"
    old = next(iter(olds))
    if _suffix(old) != _suffix(want):
        return "chunk_context (what the model reads) changed, not only the model: the chunks' context lines differ"
    if any(s[0] == want for s in state.values()):
        return "some collections already use the configured model while others do not"
    if spec_of(old) is None:
        return f"the old model {old} is not one ragweedd can load"
    return None


def _complete(stores: DataDirStores, name: str) -> bool:
    rag = stores.open_rag(name, readonly=True)
    try:
        done, total = rag.swap_progress()
    finally:
        rag.close()
    return done == total


def serving_spec(stores: DataDirStores) -> str | None:
    """For a command run without the daemon while a move is under way: the ``embed.model`` value
    of the model that serves (the collections' old one), so its searches embed the query with the
    model of the vectors they search and its ingest adds vectors of that model (the daemon gives
    them new-model vectors too). None when no move is under way. Reads only."""
    from ragweedd.errors import NotCreatedYetError
    from ragweedd.store.types import MIGRATION, PRIMARY

    olds: set[str] = set()
    moving = False
    for name in stores.indexed_collections():
        try:
            rag = stores.open_rag(name, readonly=True)
        except NotCreatedYetError:
            continue
        try:
            have = rag.embedder(PRIMARY)
            moving = moving or rag.embedder(MIGRATION) is not None
        finally:
            rag.close()
        if have is not None:
            olds.add(have[0])
    return spec_of(next(iter(olds))) if moving and len(olds) == 1 else None


def _switch(cfg: Config, paths: Paths, stores: DataDirStores, name: str) -> None:
    """Put the new vectors of a complete collection in place, and the index built from them while
    they were made (its own files, ``*_next.*``) in the place of the old index: caught up with the
    last new vectors, then written as the primary index at the change log's new end, so the new
    core searches a complete index at once. Were the index files unusable, or the process killed
    before they are written, the old index is rebuilt from the new vectors instead (its log no
    longer reaches it: ragweedd/store/sqlite/rag_swap.py)."""
    from ragweedd.index.fileformat import write_index
    from ragweedd.index.manager import IndexManager
    from ragweedd.index.passes import prepare_pass, sync_pass
    from ragweedd.store.types import MIGRATION

    directory = paths.collection_dir(name)
    rag = stores.open_rag(name)
    m = None
    try:
        target = rag.embedder(MIGRATION)
        try:
            assert target is not None, "the new model's vectors are not recorded"  # a complete move records them
            m = IndexManager(directory, {MIGRATION: target[1]}, config=cfg, start_flusher=False)
            prepare_pass(m, rag, MIGRATION)
            sync_pass(m, rag, MIGRATION)
        except Exception as e:  # noqa: BLE001 - an index only costs time: it is rebuilt from the vectors
            log.warning("model_swap_index_unused", collection=name, error=f"{type(e).__name__}: {e}",
                        action="the index is rebuilt from the new vectors")
            m = None
        if not rag.finish_model_swap():
            return
        if m is not None:
            write_index(directory, m.indexes[MIGRATION].snapshot(), rag.max_seq(), "")
    finally:
        if m is not None:
            m.close(flush=False)
        rag.close()
    _drop_index_files(paths, name)


def _drop_index_files(paths: Paths, name: str) -> None:
    from ragweedd.index.fileformat import remove_index_files
    from ragweedd.index.manager import file_suffix
    from ragweedd.store.types import MIGRATION

    remove_index_files(paths.collection_dir(name), file_suffix(MIGRATION))
