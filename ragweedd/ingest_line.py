"""The ingest line, built here and nowhere else (DESIGN §2):

    watch -> queue -> extract -> chunk -> publish -> embed -> index

``daemon_line`` builds the daemon's whole line, also the one a change of embedding model runs on
(its vectors are one more space the embedding stage fills: ragweedd/ingest/model_swap.py);
``oneshot_line`` builds the part a one-shot ``ragweedd ingest`` runs itself, which walks the folders
it is given instead of watching them and has no queue. Both are built on the parts of one
``Services`` (ragweedd/services.py, the composition root): its store backend, embedder and extra
embedding passes, so every stage writes where the faces read.

The stages get what they write to and whom they tell; none of them opens a store or builds another
stage. What the running line tells the core that runs it goes through ``LineEvents``, which the
core binds to its own methods before it starts the line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from ragweedd.ingest.pipeline import Pipeline
    from ragweedd.ingest.vectorize import Vectorizer
    from ragweedd.ingest.worker import Workers
    from ragweedd.services import Services
    from ragweedd.store.protocols import JobStore
    from ragweedd.watch.collections import Collections
    from ragweedd.watch.debounce import Debouncer


def _unbound(*_: Any) -> None:
    """An event of a line whose core has not bound it: nothing runs the line yet, so nothing
    can be owed a reaction."""


@dataclass
class LineEvents:
    """What the watcher and the embedding stage report to the core that runs the line."""

    root_event: Callable[[], None] = _unbound  # a watched root came, went or moved
    overflow: Callable[[list[str]], None] = _unbound  # events of these collections were lost
    rescan: Callable[[list[str]], None] = _unbound  # these collections need a reconciliation scan
    migrated: Callable[[], None] = _unbound  # every collection has the new model's vectors


@dataclass
class DaemonLine:
    """The daemon's ingest line: the queue and the watched collections that fill it, the workers
    that extract, chunk and publish each job, the embedding stage, and the live index they tell."""

    index_embedder_id: str  # what the collections' vectors are recorded as made by
    queue: JobStore
    debouncer: Debouncer
    collections: Collections
    vectorizer: Vectorizer
    workers: Workers
    index: Any  # IndexSync (index files of our own) or ServerIndexes (the server indexes itself)
    events: LineEvents = field(default_factory=LineEvents)


@dataclass
class OneShotLine:
    """What a one-shot ingest runs: the pipeline it feeds file by file, the embedding stage that
    gives the published chunks their vectors meanwhile, and the index files to bring in step at
    the end (None on a database server, which indexes its vectors itself)."""

    pipeline: Pipeline
    vectorizer: Vectorizer
    index: Any

    def close(self) -> None:
        self.vectorizer.stop()
        self.pipeline.close()
        if self.index is not None:
            self.index.close()


def pipeline_maker(services: Services, embedder: Any, *, extract: Callable | None,
                   defer_vectors: bool) -> Callable[[Callable[[], bool]], Pipeline]:
    """``make(should_stop)``: a pipeline on the services' stores, for one ingest thread.
    ``extract``: the extraction to run (default: untrusted formats in the capped sandbox).
    ``defer_vectors``: leave vectors to the embedding stage instead of computing them in line."""
    from ragweedd.ingest.pipeline import Pipeline
    from ragweedd.ingest.worker import make_extract

    cfg, paths, stores = services.cfg, services.paths, services.stores
    # One extract function for every pipeline, made here on the builder's thread (it imports the
    # extractors and the sandbox): an ingest thread's first job then imports nothing. It asks every
    # stop flag it was handed, so a stopping daemon still kills a running sandbox child.
    stop_flags: list[Callable[[], bool]] = []
    shared = extract or make_extract(cfg, should_stop=lambda: any(f() for f in list(stop_flags)))

    def make(should_stop: Callable[[], bool]) -> Pipeline:
        if should_stop not in stop_flags:
            stop_flags.append(should_stop)
        return Pipeline(cfg, paths, embedder, extract=shared, should_stop=should_stop,
                        defer_vectors=defer_vectors, stores=stores)

    return make


def daemon_line(services: Services, embedder: Any, index: Any, passes: Any, *, extract: Callable | None,
                watcher_factory: Callable | None, migration: Any) -> DaemonLine:
    """The daemon's line on ``services``' stores. ``embedder`` is the model that serves (the old
    one while a change of model is under way, whose ``migration`` the embedding stage fills too);
    ``index`` is told of every change; ``watcher_factory`` replaces the file watcher."""
    from ragweedd.chunk.context import index_embedder_id
    from ragweedd.ingest.vectorize import Vectorizer
    from ragweedd.ingest.worker import Workers
    from ragweedd.watch.collections import Collections
    from ragweedd.watch.debounce import Debouncer
    from ragweedd.watch.watcher import Watcher

    cfg, paths, stores = services.cfg, services.paths, services.stores
    events = LineEvents()
    embedder_id = index_embedder_id(embedder.id, cfg.chunk_context)
    queue = stores.open_jobs(max_tries=cfg.extract_max_tries)
    # Events go to the collections, which queue what needs the pipeline and write the rows of
    # files skipped from their stat themselves (watch/skipped.py).
    held: list[Collections] = []
    debouncer = Debouncer(lambda items: held[0].take_events(items), debounce_s=cfg.debounce_s,
                          delete_hold_s=cfg.delete_hold_s)
    make_watcher = watcher_factory or Watcher
    collections = Collections(cfg, paths, queue, debouncer, lambda c: make_watcher(
        debouncer, known_under=c.known_under, is_known=c.is_known,
        on_root_event=lambda coll, root: events.root_event(), on_overflow=lambda names: events.overflow(names),
        on_rescan=lambda names: events.rescan(names)), open_db=stores.open_ingest)
    held.append(collections)
    vectorizer = Vectorizer(cfg, paths, embedder, embedder_id, collections=lambda: list(collections.items),
                            on_changes=index.notify, passes=passes, migration=migration,
                            on_migrated=lambda: events.migrated(), stores=stores)
    workers = Workers(cfg, paths, queue, new_pipeline=pipeline_maker(services, embedder, extract=extract,
                                                                     defer_vectors=True),
                      resolve=collections.resolve, on_changes=index.notify,
                      on_root_missing=collections.on_root_missing, vectorizer=vectorizer)
    return DaemonLine(embedder_id, queue, debouncer, collections, vectorizer, workers, index, events)


def oneshot_line(services: Services, collection: str) -> OneShotLine:
    """The line of ``ragweedd ingest`` into ``collection``, on the services' embedder and extra
    passes (a pass whose model is missing is skipped with a warning)."""
    from ragweedd.chunk.context import index_embedder_id
    from ragweedd.index.sync import IndexSync
    from ragweedd.ingest.vectorize import Vectorizer

    cfg, stores, embedder = services.cfg, services.stores, services.embedder
    passes = services.vectors.passes
    pipeline = pipeline_maker(services, embedder, extract=None, defer_vectors=True)(lambda: False)
    vectorizer = Vectorizer(cfg, services.paths, embedder, index_embedder_id(embedder.id, cfg.chunk_context),
                            collections=lambda: [collection], on_changes=lambda name: None, passes=passes,
                            stores=stores)
    index = None if stores.shared is not None else IndexSync(cfg, services.paths, embedder.dim, passes.dims(),
                                                             stores=stores)
    return OneShotLine(pipeline, vectorizer, index)
