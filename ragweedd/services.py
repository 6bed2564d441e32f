"""The one composition root: every service is built here, for the daemon and for each one-shot
command, and whatever is built here is closed by the object that owns it.

    open_oneshot(cfg)   -> Services           search, ask, eval, ingest without a daemon
    open_daemon(cfg)    -> ragweedd.daemon.Core   the daemon's services plus watch, queue, workers,
                                              live indexes and scheduled jobs (started by the caller)

``Services`` holds what both need: the paths, the embedder (made on first use, so ``ask
--continue`` never loads a model), the history, the vector search over an ``IndexLookup`` (the
daemon's live indexes or the index files on disk), one Searcher per thread, and the ask flow.
``search_async`` adds the optional rerank stage (ragweedd/query/rerank.py) after the search; every face
that searches (the daemon's search and ask, the one-shot search and ask) goes through it.
Parts tests need to replace (the embedder, the extract function, the watcher, the reranker) are parameters here,
never environment variables read at run time.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable, Literal, cast

from ragweedd.answer.ask_flow import AskFlow
from ragweedd.answer.history import HistoryStore
from ragweedd.config import Config
from ragweedd.contract import Rewrite, SearchResult, ThreadTurn
from ragweedd.errors import RequestError
from ragweedd.logging import get_logger
from ragweedd.paths import Paths
from ragweedd.query.hyde import HyDE, make_hyde
from ragweedd.query.rerank import Reranker, make_reranker, rerank_result
from ragweedd.query.semantic_cache import SemanticCache
from ragweedd.query.vectors import VectorSearch
from ragweedd.store.backends import data_dir_of, open_backend
from ragweedd.store.protocols import StoreBackend

if TYPE_CHECKING:
    from ragweedd.answer.tree_ask import TreeScope
    from ragweedd.daemon_core import Core
    from ragweedd.index.managed import DiskIndexes
    from ragweedd.index.protocol import IndexLookup
    from ragweedd.ingest.pipeline import Pipeline
    from ragweedd.query.hybrid import Searcher

SHARED_TTL_S = 5.0
# A search that prefers the previous answer's documents looks at this many results before it cuts
# back to the ones asked for, so a preferred hit just below the cut can move up.
PREFER_FETCH = 30


log = get_logger("ragweedd.services")

class Services:
    def __init__(self, cfg: Config, paths: Paths, *, embedder: Any = None, indexes: IndexLookup | None = None,
                 disk_indexes: DiskIndexes | None = None,
                 collection_names: Callable[[], list[str]] | None = None, passes: Any = None,
                 reranker: Reranker | None | Literal["config"] = "config",
                 hyde: HyDE | None | Literal["config"] = "config", stores: StoreBackend | None = None) -> None:
        self.cfg, self.paths = cfg, paths
        # "config": the [llm] rerank of cfg (None when it is empty); tests hand in their own
        self.reranker: Reranker | None = make_reranker(cfg) if isinstance(reranker, str) else reranker
        self.hyde: HyDE | None = make_hyde(cfg) if isinstance(hyde, str) else hyde  # [llm] hyde, like the reranker
        self._embedder = embedder
        self._embedder_lock = threading.Lock()
        self._disk = disk_indexes
        # config `store`: SQLite files or PostgreSQL; closed by close() also when handed in
        self.stores: StoreBackend = stores if stores is not None else open_backend(cfg, paths)
        if passes is None and (cfg.multi_embed_384 or cfg.multi_embed_1024):
            passes = self._open_passes  # probed at the first dense search, never by `ask --continue`
        self.vectors = VectorSearch(cfg, indexes if indexes is not None else disk_indexes, passes)
        self.history = HistoryStore(self.stores.open_history(), max_entries=cfg.history_max_entries)
        self.search_cache = SemanticCache.of(cfg)  # shared by every thread's searcher
        self.ask_flow = AskFlow(cfg, self.history, embedder=lambda: self.embedder)
        # the daemon names its collections (declared or added); a one-shot command knows those it finds
        self._registry = collection_names is not None
        self._names = collection_names or self.stores.indexed_collections
        # On a database server every machine's collections are searchable (docs/team.md), also
        # those this machine does not declare.
        self._shared_db = self._registry and self.stores.shared is not None
        self._shared: dict[str, int] = {}  # shared_collections' last answer, and when
        self._shared_at = float("-inf")
        self._local = threading.local()
        self._searchers: list[Searcher] = []
        self._lock = threading.Lock()
        self._generation = 0  # bumped when a collection is removed: searchers opened before are stale
        self._closed = False

    # --- parts ------------------------------------------------------------------------------------
    @property
    def embedder(self) -> Any:
        with self._embedder_lock:
            if self._embedder is None:
                from ragweedd.embed.factory import make_embedder

                self._embedder = make_embedder(self.cfg.embed_model, self.cfg)
            return self._embedder

    def _open_passes(self) -> Any:
        from ragweedd.ingest.vectorize import open_passes

        return open_passes(self.cfg, self.embedder)

    def pipeline(self, *, extract: Callable | None = None, defer_vectors: bool = False) -> Pipeline:
        """An ingest pipeline whose untrusted formats are extracted in the capped sandbox; the
        caller closes it. ``defer_vectors``: the caller runs the embedding stage."""
        from ragweedd.ingest_line import pipeline_maker

        return pipeline_maker(self, self.embedder, extract=extract, defer_vectors=defer_vectors)(lambda: False)

    # --- search -----------------------------------------------------------------------------------
    def _where(self) -> str:
        """Where the indexes are, as a person reading an error knows it."""
        return self.stores.where

    def _known(self) -> list[str]:
        """The collections a search may name: this machine's, and on a database server every
        collection the database holds documents of (another machine's too)."""
        mine = self._names()
        if not self._shared_db:
            return mine
        return sorted(set(mine) | set(self.shared_collections(mine)))

    def shared_collections(self, mine: list[str]) -> dict[str, int]:
        """On a database server: the collections not in ``mine`` that hold documents, with their
        number. One that every machine removed keeps its row but no paths: it no longer exists.
        Read again after SHARED_TTL_S (each count opens a connection; searches come faster), so
        another machine's new collection is searchable here within seconds."""
        with self._lock:
            if time.monotonic() - self._shared_at < SHARED_TTL_S:
                return {n: c for n, c in self._shared.items() if n not in mine}
        out: dict[str, int] = {}
        for name in self.stores.indexed_collections():
            if name in mine:
                continue
            rag = self.stores.open_rag(name, readonly=True)
            try:
                n = rag.document_count()
            finally:
                rag.close()
            if n:
                out[name] = n
        with self._lock:
            self._shared, self._shared_at = dict(out), time.monotonic()
        return out

    def searchable(self, names: list[str] | None = None) -> list[str]:
        """The collections a search covers: ``names`` (each must exist), else every collection
        that has an index."""
        from ragweedd.errors import NotFoundError

        have = self._known()
        if names:
            missing = sorted(set(names) - set(have))
            if missing:
                if not self._registry:
                    raise NotFoundError(f"collection '{missing[0]}' has no index in {self._where()}",
                                        hint="ingest it first: ragweedd ingest PATH --collection NAME")
                raise NotFoundError(f"collection '{missing[0]}' does not exist", action="list_collections")
            return list(names)
        return sorted(n for n in have if self.stores.has_rag(n))

    def search(self, query: str, collections: list[str] | None = None, limit: int = 10, *,
               path_glob: str | None = None, file_type: str | None = None, doc_id: str | None = None,
               mode: str = "hybrid", loop: asyncio.AbstractEventLoop | None = None) -> SearchResult:
        """Hybrid search (DESIGN §8) on this thread's Searcher. Blocking: faces call it from a
        worker thread; ``loop`` is the event loop they came from, where an LLM call of the search
        (HyDE) runs."""
        from ragweedd.query.filters import Filters

        for attempt in (1, 2):
            seen = self._collection_set()
            names = self.searchable(collections)
            if not names and self._registry and self._names():
                raise RequestError(f"nothing is indexed yet in {', '.join(sorted(self._names()))}",
                                   action="wait_for_indexing")
            if not names:
                raise RequestError(f"nothing is indexed yet in {self._where()}", action="add_collection")
            f = Filters.make(collections=names, path_glob=path_glob, file_types=[file_type] if file_type else None,
                             doc_ids=[doc_id] if doc_id else None)
            try:
                res = self.searcher(names).search(query, filters=f, limit=limit, mode=mode, loop=loop)
                break
            except Exception as e:
                # A collection removed (its index closed, its files deleted) or added while this
                # search opened or read it: asked again over the collections there are now, which
                # answers, or says the named collection does not exist. Any other failure stands.
                if attempt == 2 or self._collection_set() == seen:
                    raise
                log.info("search_retried_after_collection_change", error=f"{type(e).__name__}: {e}"[:300])
        # every face (API, MCP, ragweedctl, one-shot ragweedd) shows the same snippet with the same
        # words marked; worked out here, after the cache (whose result may come from other words)
        from ragweedd.query.snippet import add_snippets

        res = cast(SearchResult, {**res, "results": add_snippets(cast(list, res["results"]), query,
                                                                   res["retrieval_meta"].get("language"))})
        return res

    async def search_async(self, query: str, collections: list[str] | None = None, limit: int = 10, *,
                           path_glob: str | None = None, file_type: str | None = None, doc_id: str | None = None,
                           mode: str = "hybrid") -> SearchResult:
        """``search`` in a worker thread, then the optional rerank on the caller's event loop (the
        LLM providers are asynchronous; the search is blocking). With a reranker the search fetches
        at least its number of candidates and the rerank cuts back to ``limit``."""
        rr = self.reranker
        fetch = max(limit, rr.candidates) if rr is not None else limit
        res = await asyncio.to_thread(self.search, query, collections, fetch, path_glob=path_glob,
                                      file_type=file_type, doc_id=doc_id, mode=mode,
                                      loop=asyncio.get_running_loop())
        if rr is not None:
            await rerank_result(rr, query, cast(dict, res), limit=limit, keep_pct=self.cfg.pre_annotate_keep)
        return res

    async def followup_search(self, question: str, thread: list[ThreadTurn], *, collections: list[str] | None = None,
                              limit: int = 10, path_glob: str | None = None, file_type: str | None = None,
                              doc_id: str | None = None) -> SearchResult:
        """The search of a question asked after ``thread`` (the conversation's earlier turns,
        oldest first; empty for its first question): the question rewritten into a standalone query
        (one short call to the synthesis LLM when one is configured, else the rules of
        query/followup.py over the collections' IDF), the earlier turn's filters carried when a
        follow-up names none, the previous answer's documents preferred by the rules when it keeps
        their subject. ``retrieval_meta["rewrite"]`` says what was done (docs/answers.md)."""
        from ragweedd.query import followup

        given: dict[str, Any] = {"collections": list(collections) if collections else None, "path_glob": path_glob,
                                 "file_type": file_type, "doc_id": doc_id}
        filters, carried = followup.carried_filters(given, thread)
        if not thread:
            rw = _rewrite(question, question, "none", "the first question of the conversation")
        elif self.cfg.llm_synthesis:
            rw = await self._llm_rewrite(question, thread)
        else:
            rw = await asyncio.to_thread(self._rule_rewrite, question, thread, filters["collections"])
        if not rw["rewritten"]:
            filters, carried = given, False
        rw["filters"] = {k: v for k, v in filters.items() if v}
        rw["filters_carried"] = carried
        docs = rw["preferred_documents"]
        res = await self.search_async(rw["query"], filters["collections"], max(limit, PREFER_FETCH) if docs else limit,
                                      path_glob=filters["path_glob"], file_type=filters["file_type"],
                                      doc_id=filters["doc_id"])
        if docs:
            res["results"] = cast(Any, followup.prefer(cast(list, res["results"]), docs, limit))
        res["retrieval_meta"]["rewrite"] = rw
        return res

    def _rule_rewrite(self, question: str, thread: list[ThreadTurn], collections: list[str] | None) -> Rewrite:
        from ragweedd.query import followup

        names = self.searchable(collections)
        searcher = self.searcher(names) if names else None

        def stats(words: list[str]) -> tuple[dict[str, int], int]:
            return searcher.word_stats(words, names) if searcher is not None else ({}, 0)

        r = followup.rewrite(question, thread, stats)
        rw = _rewrite(question, r.query, "rules", r.reason, rewritten=r.rewritten)
        rw["carried"], rw["replaced"] = r.carried, r.replaced
        if r.rewritten and r.same_subject:
            rw["preferred_documents"] = list(thread[-1]["documents"])
        return rw

    async def _llm_rewrite(self, question: str, thread: list[ThreadTurn]) -> Rewrite:
        from ragweedd.errors import RagweedError
        from ragweedd.llm.factory import make_provider
        from ragweedd.query import followup_llm

        spec = self.cfg.llm_synthesis
        try:
            provider = make_provider(spec, self.cfg, key="llm.synthesis")
        except RagweedError as e:  # no key, an unknown provider: the answer says so; the search goes on
            rw = _rewrite(question, question, "llm", f"the LLM rewrite failed, searched as asked: {e.message}")
            rw["llm"] = {"provider": spec, "model": None, "messages": [], "reply": None, "input_tokens": 0,
                         "output_tokens": 0, "calls": 0, "ms": 0.0, "error": e.message[:300]}
            return rw
        try:
            query, call = await followup_llm.rewrite(question, thread, provider)
        finally:
            await provider.aclose()
        if query is None:
            rw = _rewrite(question, question, "llm", f"the LLM rewrite failed, searched as asked: {call.get('error')}")
        elif " ".join(query.split()).lower() == " ".join(question.split()).lower():
            rw = _rewrite(question, question, "llm", "the LLM found that it stands alone")
        else:
            rw = _rewrite(question, query, "llm", "rewritten by the LLM from the earlier turns", rewritten=True)
        rw["llm"] = call
        return rw

    def tree_scope(self, collections: list[str] | None, mode: str | None, *, path_glob: str | None = None,
                   file_type: str | None = None, doc_id: str | None = None) -> TreeScope | None:
        """Where ask mode "tree" reads (None for the ordinary mode): the collections, narrowed by
        the same filters as the search's; a mode that does not exist is an error naming the ones
        that do."""
        if mode in (None, "hybrid"):
            return None
        if mode != "tree":
            raise RequestError(f"ask mode '{mode}' does not exist", hint="use 'hybrid' (the default) or 'tree'")
        from ragweedd.answer.tree_ask import TreeScope
        from ragweedd.query.filters import Filters

        f = Filters.make(path_glob=path_glob, file_types=[file_type] if file_type else None,
                         doc_ids=[doc_id] if doc_id else None)
        return TreeScope(self.searchable(collections), lambda name: self.stores.open_rag(name, readonly=True),
                         self.paths.cache / "tree_summaries.sqlite3", f if f.restricts_chunks else None)

    def searcher(self, names: list[str]) -> Searcher:
        """Each thread keeps its own Searcher (connections, IDF caches, WordNet handles), rebuilt
        when the set of searchable collections changes; all of them are closed by close()."""
        from ragweedd.query.hybrid import Searcher

        have = sorted(n for n in self._known() if self.stores.has_rag(n))
        key = (self._generation, tuple(have))
        held = getattr(self._local, "searcher", None)
        if held is not None and held[0] == key and set(names) <= set(have):
            return held[1]
        if held is not None:
            self._release(held[1])
        s = Searcher(self.cfg, self.paths, self.embedder, collections=have, vectors=self.vectors,
                     stores=self.stores, cache=self.search_cache, hyde=self.hyde)
        with self._lock:
            if self._closed:
                s.close()
                raise RequestError("ragweedd is stopping", hint="retry once it is running again")
            self._searchers.append(s)
        self._local.searcher = (key, s)
        return s

    def _release(self, s: Searcher) -> None:
        with self._lock:
            if s in self._searchers:
                self._searchers.remove(s)
        s.close()

    def forget_collection(self, name: str) -> None:
        """A removed collection: every thread's searcher is replaced at its next search (one still
        searching finishes first), so none keeps the removed database open or serves it again
        should a collection of the same name come back."""
        # the generation moves before anything is closed: a search that then fails on the closed
        # index sees that the collections changed under it and is asked again (search())
        with self._lock:
            self._generation += 1
            self._shared_at = float("-inf")  # read again: the name may now be another machine's
        self.vectors.forget(name)
        if self.search_cache is not None:
            self.search_cache.clear()  # a new collection of that name starts its sequences again

    def _collection_set(self) -> tuple[int, tuple[str, ...]]:
        """What a search's searcher depends on: the removal generation and the collections with
        an index."""
        return self._generation, tuple(sorted(n for n in self._known() if self.stores.has_rag(n)))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            held, self._searchers = self._searchers, []
        for s in held:
            s.close()
        if self._disk is not None:
            self._disk.close()
        self.vectors.close()
        self.history.close()
        self.stores.close()
        emb = self._embedder
        if emb is not None and hasattr(emb, "close"):
            emb.close()


def _rewrite(question: str, query: str, method: str, reason: str, *, rewritten: bool = False) -> Rewrite:
    return {"question": question, "query": query, "rewritten": rewritten, "method": method,  # type: ignore[typeddict-item]
            "reason": reason, "carried": [], "replaced": [], "filters": {}, "filters_carried": False,
            "preferred_documents": []}


def open_oneshot(cfg: Config, *, embedder: Any = None) -> Services:
    """The services of a command that runs without the daemon: indexes are read from their files
    and caught up in memory, never written."""
    from ragweedd.index.managed import DiskIndexes
    from ragweedd.index.numba_env import setup_for

    paths = Paths.from_config(cfg).ensure()
    setup_for(paths)  # before anything imports numba
    stores = open_backend(cfg, paths)
    try:
        data_dir = data_dir_of(stores)
        if embedder is None and data_dir is not None:
            from ragweedd.ingest.model_swap import serving_spec

            spec = serving_spec(data_dir)  # a change of embed.model under way: the old model still serves
            if spec is not None:
                from ragweedd.embed.factory import make_embedder

                embedder = make_embedder(spec, cfg)
        return Services(cfg, paths, embedder=embedder, disk_indexes=DiskIndexes(cfg, paths), stores=stores)
    except BaseException:
        stores.close()  # the services that would have closed it were never made
        raise


def open_stores(cfg: Config) -> StoreBackend:
    """The configured store alone, for a command that works on the stores themselves
    (``ragweedd reembed``); the caller closes it."""
    return open_backend(cfg, Paths.from_config(cfg).ensure())


def open_copy_ends(cfg: Config, target: str, source_name: str) -> tuple[StoreBackend, Any]:
    """``ragweedd migrate``'s two sides: this data directory's own files, and the database server
    ``target`` names, written as the source ``source_name`` (its ``source``, for the report); the
    caller closes both."""
    from ragweedd.store.backends import open_data_dir, open_store

    paths = Paths.from_config(cfg)
    return open_data_dir(paths), open_store(target, paths, source=source_name)


def open_daemon(cfg: Config, *, embedder: Any = None, extract: Callable | None = None,
                watcher_factory: Callable | None = None, repair: Sequence[str] | None = None) -> Core:
    """The daemon's services, not yet started (``core.start()``; ``core.stop()`` stops and closes
    everything it holds). ``repair``: the collections whose stores are checked, and mended, before
    anything opens them (the start-up repair); what it did is the core's ``repaired``."""
    from ragweedd.index.numba_env import setup_for

    paths = Paths.from_config(cfg).ensure()
    numba_cache = setup_for(paths)
    # the language detector's model takes ~2 s to load: loaded beside the start-up, not in the
    # first file's publish or the first search (ragweedd/keyterms.py)
    from ragweedd import keyterms

    threading.Thread(target=keyterms.warm, name="keyterms-warm", daemon=True).start()
    stores = open_backend(cfg, paths)
    try:
        repaired = stores.repair_at_start(repair) if repair is not None else {}
        if stores.shared is None:  # the HNSW kernels, compiled beside the start when not cached yet
            from ragweedd.index import warm as index_warm

            index_warm.start(numba_cache)
        opener = _open_server_daemon if stores.shared is not None else _open_local_daemon
        core = opener(cfg, paths, stores, embedder=embedder, extract=extract, watcher_factory=watcher_factory)
    except BaseException:
        stores.close()  # the core that would have closed it was never made
        raise
    core.repaired = repaired
    return core


def _open_local_daemon(cfg: Config, paths: Paths, stores: StoreBackend, *, embedder: Any, extract: Callable | None,
                       watcher_factory: Callable | None) -> Core:
    """The daemon on the data directory's own files, with an index of its own to keep in step and
    a change of embed.model made beside the serving one (ragweedd/ingest/model_swap.py) when the
    backend can make one."""
    _adopt_unrecorded(cfg, stores)
    data_dir = data_dir_of(stores)
    from ragweedd.errors import EmbedderError
    from ragweedd.index.sync import IndexSync
    from ragweedd.ingest.model_swap import blocked, daemon_collections, prepare
    from ragweedd.ingest.vectorize import open_passes

    owned = embedder is None
    migration = None
    try:
        if embedder is None:
            from ragweedd.embed.factory import make_embedder

            embedder = make_embedder(cfg.embed_model, cfg)
        int(embedder.dim), embedder.id  # an Ollama model's server is first asked here
    except EmbedderError as e:
        # a new model not loadable yet while the old one can still serve: no downtime
        held = blocked(cfg, data_dir, e, daemon_collections(cfg, data_dir)) if data_dir is not None else None
        if held is None:
            raise
        if owned and embedder is not None and hasattr(embedder, "close"):
            embedder.close()
        embedder, migration = held
    if migration is None and data_dir is not None:
        # a changed embed.model: the old model serves while the new one's vectors are built beside
        embedder, migration = prepare(cfg, paths, embedder, daemon_collections(cfg, data_dir), stores=data_dir)
        if migration is not None:
            migration.owned = owned  # the core then closes the new model it does not serve with
    passes = open_passes(cfg, embedder)  # a pass whose model is missing is skipped, never fatal
    # the new model's vectors get their index beside the old one while they are made
    building = {migration.space: migration.dim} if migration is not None and not migration.blocked else {}
    index = IndexSync(cfg, paths, embedder.dim, {**passes.dims(), **building}, stores=stores)
    return _core(cfg, paths, stores, embedder, index, passes, extract=extract, watcher_factory=watcher_factory,
                 migration=migration)


def _adopt_unrecorded(cfg: Config, stores: StoreBackend) -> None:
    """Serve every collection of the data directory: one made by a one-shot ingest of an older
    version (which did not record it) is listed, searched and answered from like the others. Its
    folders are not known, so it is not watched until it is ingested again or added by name."""
    from ragweedd.logging import get_logger

    db = stores.open_ingest()
    try:
        known = set(cfg.collections) | {name for name, *_ in db.run_time_collections()}
        for name in stores.indexed_collections():
            if name not in known:
                db.save_collection(name, [], [], "")
                get_logger("ragweedd").info("collection_adopted", collection=name,
                                            reason="indexed in the data directory, in no config or record")
    finally:
        db.close()


def _open_server_daemon(cfg: Config, paths: Paths, stores: StoreBackend, *, embedder: Any, extract: Callable | None,
                        watcher_factory: Callable | None) -> Core:
    """The daemon on a database server that indexes its vectors itself (PostgreSQL + pgvector):
    no index files to keep in step, and the collections' embedder is shared by every machine, so a
    change of model is not made by one daemon on its own (docs/postgres.md)."""
    from ragweedd.index.server_index import ServerIndexes
    from ragweedd.ingest.vectorize import open_passes

    if embedder is None:
        from ragweedd.embed.factory import make_embedder

        embedder = make_embedder(cfg.embed_model, cfg)
    int(embedder.dim), embedder.id  # an Ollama model's server is first asked here
    passes = open_passes(cfg, embedder)
    return _core(cfg, paths, stores, embedder, ServerIndexes(stores), passes, extract=extract,
                 watcher_factory=watcher_factory)


def _core(cfg: Config, paths: Paths, stores: StoreBackend, embedder: Any, index: Any, passes: Any, *,
          extract: Callable | None, watcher_factory: Callable | None, migration: Any = None) -> Core:
    """The services the faces use, the ingest line (ragweedd/ingest_line.py) on the same parts, and
    the core that runs the line. A search names the collections the line's registry holds."""
    from ragweedd.daemon_core import Core
    from ragweedd.ingest_line import daemon_line

    registry: list[Any] = []
    services = Services(cfg, paths, embedder=embedder, indexes=index, passes=passes, stores=stores,
                        collection_names=lambda: list(registry[0].items))
    line = daemon_line(services, embedder, index, passes, extract=extract, watcher_factory=watcher_factory,
                       migration=migration)
    registry.append(line.collections)
    try:
        return Core(services, line, passes, migration=migration)
    except BaseException:
        line.collections.close()  # what the core would have closed at its stop
        line.queue.close()
        raise
