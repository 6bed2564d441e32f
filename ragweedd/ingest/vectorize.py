"""The embedding stage: vectors follow their chunks.

A file's chunks are published (stored, keyword-searchable, cited) as soon as it is extracted; the
chunks whose vector is not in the embed cache are listed in the collection's ``pending_vectors``.
This stage embeds them in batches and writes each batch's vectors, the removal of their pending
rows and their change-log entries in one transaction (``RagDB.add_vectors``), then tells the index
side. So:

- a folder of 5,000 filings is keyword-searchable minutes after it is dropped, while the embedder
  (tens of chunks/s on a laptop) catches up for hours;
- extraction (sandbox subprocesses, one per ingest worker) and embedding run at the same time, so
  a folder of PDFs ingests at the embedder's pace, not at extraction + embedding;
- a kill -9 between the two steps loses nothing (the pending rows are in the database, and the
  stage starts with every collection that has some) and duplicates nothing (the pending row is the
  claim on a chunk's vector; a batch written twice writes it once);
- batches span files, so many small notes embed in full batches.

Each computed vector is also put in the embed cache (keyed by embedder id and the hash of what was
embedded), so an edited file's unchanged chunks and a re-ingest reuse it.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable

from ragweedd.chunk.chunker import text_hash
from ragweedd.chunk.context import embed_input, index_embedder_id
from ragweedd.config import Config
from ragweedd.embed.long import EmbedStopped, embed_texts
from ragweedd.embed.passes import Passes
from ragweedd.errors import EmbedderMismatchError, Interrupted, NotCreatedYetError, RagweedError
from ragweedd.ingest.priority import lower_priority
from ragweedd.logging import get_logger
from ragweedd.supervise import Supervisor

if TYPE_CHECKING:
    from ragweedd.store.protocols import StoreBackend

log = get_logger("ragweedd.ingest")
BATCHES_PER_READ = 1  # embedding batches per round: each round is cached and written at once, so a
# kill loses at most the batch in flight
# How often a collection whose last fill left chunks pending is looked at again. In a shared store
# those are chunks another process took: it writes their vectors or dies with them, and neither
# tells this process, whose status would otherwise say "waiting for vectors" until the next file.
RECHECK_S = 3.0


def fill_vectors(rag: Any, cache: Any, embedder: Any, index_embedder_id: str, *, batch_size: int,
                 should_stop: Callable[[], bool] | None = None,
                 on_batch: Callable[[int, int], None] | None = None) -> tuple[int, int]:
    """Embed every chunk of ``rag`` that waits for its vector, oldest first, a batch at a time,
    each batch written at once. Returns (vectors written, texts sent to the embedder);
    ``on_batch(written, sent)`` follows each batch. Raises :class:`Interrupted` between batches
    when ``should_stop()`` says so."""
    return _fill(rag, cache, embedder, embedder.dim, "vectors", read=rag.pending_batch,
                 write=lambda items: rag.add_vectors(index_embedder_id, items), batch_size=batch_size,
                 should_stop=should_stop, on_batch=on_batch)


def _fill(rag: Any, cache: Any, embedder: Any, dim: int, what: str, *, read: Callable[[int, int], list],
          write: Callable[[list], list], batch_size: int, after_id: int = 0,
          should_stop: Callable[[], bool] | None = None,
          on_batch: Callable[[int, int], None] | None = None) -> tuple[int, int]:
    """The loop both the primary vectors and each extra pass's run: ``read(n, after)`` gives
    (chunk id, embedding id, text, context) rows waiting for a vector, their texts go through the
    embed cache under the embedder's own id, ``write(rows with vectors)`` stores a batch."""

    eid = embedder.id
    written = sent = 0
    last = after_id
    while True:
        rows = read(batch_size * BATCHES_PER_READ, last)
        if not rows:
            return written, sent
        last = rows[-1][0]
        inputs = [embed_input(text, ctx) for _, _, text, ctx in rows]
        hashes = [text_hash(x) for x in inputs]
        have = cache.cached_vectors(eid, hashes)
        todo = {h: x for h, x in zip(hashes, inputs) if h not in have}
        if should_stop is not None and should_stop():
            raise Interrupted(f"stopped with chunks of {rag.collection} waiting for {what}")
        if todo:
            items = list(todo.items())
            try:
                vecs = embed_texts(embedder, [x for _, x in items], batch_size=batch_size, should_stop=should_stop)
            except EmbedStopped as e:
                raise Interrupted(f"stopped while embedding {what} of {rag.collection}") from e
            if vecs.shape[1] != dim:
                from ragweedd.errors import EmbedderError

                raise EmbedderError(f"the embedder {eid} returned {vecs.shape[1]}-d vectors for {what}, not {dim}-d",
                                    hint="check the model the configuration names")
            blobs = [(h, vecs[j].astype("float32").tobytes()) for j, (h, _) in enumerate(items)]
            cache.store_vectors(eid, dim, blobs)
            have.update(blobs)
        done = write([(cid, emb_id, ctx, have[h]) for (cid, emb_id, _, ctx), h in zip(rows, hashes)])
        written += len(done)
        sent += len(todo)
        if on_batch is not None:
            on_batch(len(done), len(todo))


def open_passes(cfg: Config, primary: Any) -> Any:
    """The extra embedding passes of ``cfg`` (ragweedd.embed.passes.Passes), their vectors
    recorded under the same input format as the primary's."""

    return Passes.open(cfg, primary, lambda eid: index_embedder_id(eid, cfg.chunk_context))


def fill_pass_vectors(rag: Any, cache: Any, p: Any, *, batch_size: int, after_id: int = 0,
                      should_stop: Callable[[], bool] | None = None,
                      on_batch: Callable[[int, int], None] | None = None) -> tuple[int, int]:
    """The same as ``fill_vectors`` for the extra embedding pass ``p`` (ragweedd.embed.passes):
    every chunk of ``rag`` (with an id above ``after_id``) without a vector in the pass's space
    gets one. Vectors of another model recorded for that space are dropped first (the pass's model
    changed). The pass's vectors go through the embed cache under the pass embedder's own id."""
    have_id = rag.embedder(p.space)
    if have_id is None or have_id[0] != p.index_id or have_id[1] != p.dim:
        gone = rag.reset_pass(p.space, p.index_id, p.dim)
        if have_id is not None:
            log.info("embed_pass_reset", collection=rag.collection, space=p.space, was=have_id[0], now=p.index_id,
                     vectors_dropped=gone)
    return _fill(rag, cache, p.embedder, p.dim, f"{p.key} vectors",
                 read=lambda n, after: rag.pass_missing_batch(p.space, n, after),
                 write=lambda items: rag.add_pass_vectors(p.space, p.index_id, items), batch_size=batch_size,
                 after_id=after_id, should_stop=should_stop, on_batch=on_batch)


class Vectorizer:
    """One thread that fills the pending vectors of every collection (see the module docstring).

    ``collections()`` lists the collections that exist; ``on_changes(name)`` tells the index side
    that vectors were logged. ``notify(name)`` wakes the thread for a collection (the ingest
    workers call it after each published file)."""

    def __init__(self, cfg: Config, paths: Any, embedder: Any, index_embedder_id: str, *,
                 collections: Callable[[], list[str]], on_changes: Callable[[str], None],
                 passes: Any = None, migration: Any = None,
                 on_migrated: Callable[[], None] | None = None, stores: StoreBackend) -> None:
        self.cfg, self.paths, self.embedder = cfg, paths, embedder
        self.stores: StoreBackend = stores
        # extra embedding passes, filled after the primary vectors of each collection
        self.passes = passes if passes is not None else Passes.none()
        self.index_embedder_id = index_embedder_id
        self.collections, self.on_changes = collections, on_changes
        # A change of embed.model under way (ragweedd/ingest/model_swap.py): its vectors are filled
        # like an extra pass's, last; ``on_migrated()`` once every collection has all of them.
        self.migration = migration
        self.on_migrated = on_migrated
        # Every collection is looked at once at start (chunks left pending by a crash or a stop),
        # and counts as unsettled from construction, before the thread runs.
        self._dirty: set[str] = set(collections())
        # Collections whose extra-pass vectors were interrupted to let primary vectors go first:
        # taken up again once no collection waits for primary vectors.
        self._backlog: set[str] = set()
        # (collection, space) -> (chunk id up to which every chunk has a pass vector, the change log's
        # seq when that was read, the pass's embedder): a fill starts above it unless a chunk was
        # deleted since (its id may be reused by a new chunk), so a large collection is not scanned
        # whole after every published file.
        self._pass_marks: dict[tuple[str, str], tuple[int, int, str]] = {}
        self._cv = threading.Condition()
        self._stop = threading.Event()
        self._busy = False
        self._forgotten: set[str] = set()  # removed collections: their fill stops at the next batch
        self.summary: dict[str, tuple[int, int, int]] = {}  # collection -> (pending chunks, pending docs, docs)
        self.blocked: dict[str, str] = {}  # collection -> why its vectors are refused (a shared store)
        self.recent: deque[tuple[float, int]] = deque(maxlen=400)  # (t, vectors written) per batch
        self.written = 0
        self.sent = 0
        self.supervisor = Supervisor("embedding", "new chunks are keyword-searchable but get no vectors")
        self._thread = threading.Thread(target=lambda: self.supervisor.run(self._run), name="ragweedd-embed",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        self.supervisor.stop()
        with self._cv:
            self._cv.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def drain(self) -> str | None:
        """Wait until every collection told about has been filled (the one-shot ingest's end).
        Returns None, or the error that stopped the embedding (the chunks it left stay pending)."""
        failures = self.supervisor.failures
        with self._cv:
            while (self._dirty or self._backlog or self._busy) and self._thread.is_alive():
                if self.supervisor.failures > failures:
                    return self.supervisor.last_error or "the embedding failed"
                self._cv.wait(0.5)
        return None

    def alive(self) -> bool:
        return self._thread.is_alive()

    def notify(self, collection: str) -> None:
        with self._cv:
            self._forgotten.discard(collection)  # a collection added again under the same name
            self._dirty.add(collection)
            self._cv.notify()

    def forget(self, collection: str) -> None:
        """The collection was removed: a fill under way stops at its next batch, and it leaves
        the figures."""
        with self._cv:
            self._forgotten.add(collection)
            self._dirty.discard(collection)
            self._backlog.discard(collection)
            for key in [k for k in self._pass_marks if k[0] == collection]:
                del self._pass_marks[key]
            for p in self.passes.all() + ([self.migration] if self.migration is not None else []):
                p.vectors.pop(collection, None)
                p.missing.pop(collection, None)
            self.summary.pop(collection, None)

    def _run(self) -> None:
        lower_priority(self.cfg.ingest_nice)
        cache = self.stores.open_ingest()
        try:
            while not self._stop.is_set():
                with self._cv:
                    while not self._dirty and not self._backlog and not self._stop.is_set():
                        left = self._left_pending()
                        if not self._cv.wait(RECHECK_S if left else None) and left:
                            self._dirty.update(left)
                    if self._stop.is_set():
                        return
                    name = min(self._dirty or self._backlog)
                    self._dirty.discard(name)
                    self._backlog.discard(name)
                    self._busy = True
                try:
                    self._fill(name, cache)
                    self.blocked.pop(name, None)
                except Interrupted:
                    if self._stop.is_set():
                        return
                except EmbedderMismatchError as e:
                    # a shared collection moved to another model (ragweedd reembed): this daemon
                    # must not write its vectors there, and its other collections go on
                    if name not in self.blocked:
                        log.error("vectors_refused", collection=name, error=str(e))
                    self.blocked[name] = str(e)  # the message ends with its hint
                except BaseException:
                    # an embedder that fails (a model server down): the chunks stay pending, and
                    # the collection is looked at again when the supervisor restarts this loop
                    with self._cv:
                        if name not in self._forgotten:
                            self._dirty.add(name)
                    raise
                finally:
                    with self._cv:
                        self._busy = False
                        self._cv.notify_all()
        finally:
            cache.close()

    def _left_pending(self) -> set[str]:
        """Collections whose last look left chunks waiting (taken by another process of a shared
        store, or refused), other than those whose vectors this process may not write."""
        return {name for name, s in self.summary.items() if s[0] and name not in self.blocked
                and name not in self._forgotten}

    def _fill(self, name: str, cache: Any) -> None:
        exists = self.stores.has_rag(name)
        if name not in self.collections() or not exists:
            self.summary.pop(name, None)
            return
        try:
            rag = self.stores.open_rag(name)
        except NotCreatedYetError:
            return
        try:
            self._refresh(name, rag)
            # a shared store: a collection moved to another model is left to the daemons that run
            rag.check_embedder(self.index_embedder_id)  # it, before any chunk is taken
            if self.summary.get(name, (0, 0, 0))[0]:
                self._fill_primary(name, rag, cache)
            for p in self.passes.working():
                self._fill_pass(name, rag, cache, p)
            m = self.migration
            if m is not None and m.problem is None:
                self._fill_pass(name, rag, cache, m, fail=self._migration_failed)
        except BaseException:
            try:  # a shared store: chunks taken and not embedded go to whoever can embed them
                rag.release_claims()
            except Exception as e:  # noqa: BLE001 - the server away: they go when this process does
                log.warning("claims_not_released", collection=name, error=str(e))
            raise
        finally:
            rag.close()
        self._check_migrated()

    def _migration_failed(self, p: Any, error: str) -> None:
        # The old model keeps serving; the move is tried again at the next start.
        p.problem = (f"the change of embed.model to {p.spec!r} stopped ({error}); searches keep using the old "
                     f"model {p.old_id}; fix the new model and restart ragweedd to go on where it stopped")
        log.warning("model_swap_failed", model=p.spec, error=error)

    def _check_migrated(self) -> None:
        """Say once when every collection has a new-model vector for each of its chunks."""
        m = self.migration
        if m is None or m.ready or m.problem is not None or self.on_migrated is None:
            return
        names = self.collections()
        with self._cv:
            if self._dirty or self._backlog:
                return
        if any(m.missing.get(n, 1) for n in names if self.paths.rag_db(n).exists()):
            return
        m.ready = True
        log.info("model_swap_ready", model=m.spec, collections=sorted(names))
        self.on_migrated()

    def _fill_primary(self, name: str, rag: Any, cache: Any) -> None:
        t0 = time.monotonic()

        def batch_done(written: int, sent: int) -> None:
            self.recent.append((time.monotonic(), written))
            self.written += written
            self.sent += sent
            if name in self._forgotten:
                return
            self._refresh(name, rag)
            if written:
                self.on_changes(name)

        def stop() -> bool:
            return self._stop.is_set() or name in self._forgotten

        written, sent = fill_vectors(rag, cache, self.embedder, self.index_embedder_id,
                                     batch_size=self.cfg.embed_batch_size, should_stop=stop,
                                     on_batch=batch_done)
        self._refresh(name, rag)
        log.info("vectors_written", collection=name, vectors=written, embedded=sent,
                 ms=round((time.monotonic() - t0) * 1000, 1))

    def _fill_pass(self, name: str, rag: Any, cache: Any, p: Any,
                   fail: Callable[[Any, str], None] | None = None) -> None:
        """Fill one extra pass (or the new model of a migration) of a collection. Its failure
        skips the pass (and says so in status); it never stops the primary vectors of this or any
        other collection."""
        fail = fail or self.passes.fail

        t0 = time.monotonic()

        def batch_done(written: int, sent: int) -> None:
            # the stage's own figures (rate, ETA, embedded) stay the primary's; status shows each pass's
            if name in self._forgotten:
                return
            p.missing[name] = max(0, p.missing.get(name, 0) - written)
            p.vectors[name] = p.vectors.get(name, 0) + written
            if written:
                self.on_changes(name)

        def stop() -> bool:
            # new primary work anywhere goes first: a pass's backfill can take hours
            return self._stop.is_set() or name in self._forgotten or bool(self._dirty)

        key = (name, p.space)
        if name not in p.missing:  # the first look at this collection: status shows the work ahead
            p.vectors[name] = rag.pass_vector_count(p.space)
            p.missing[name] = max(0, rag.chunk_count() - p.vectors[name])
        seq = rag.max_seq()  # read before the top id: a delete after it resets the mark
        top = rag.max_chunk_id()
        mark = self._pass_marks.get(key)
        start = 0
        if mark is not None and mark[2] == p.index_id and rag.change_counts_after(mark[1])[1] == 0:
            start = mark[0]
        try:
            written, sent = fill_pass_vectors(rag, cache, p, batch_size=self.cfg.embed_batch_size, after_id=start,
                                              should_stop=stop, on_batch=batch_done)
            self._pass_marks[key] = (top, seq, p.index_id)
        except Interrupted:
            if self._stop.is_set() or name in self._forgotten:
                raise
            with self._cv:
                self._backlog.add(name)  # after the primary vectors now waiting
            return
        except RagweedError as e:
            fail(p, e.message)
            return
        except Exception as e:  # noqa: BLE001 - whatever breaks an optional pass leaves the primary alone
            fail(p, f"{type(e).__name__}: {e}")
            return
        finally:
            if name not in self._forgotten:
                # counted when the whole collection was looked at, else kept by batch_done
                if not start or name not in p.vectors:
                    p.vectors[name] = rag.pass_vector_count(p.space)
                p.missing[name] = max(0, rag.chunk_count() - p.vectors[name])
        if written or sent:
            log.info("pass_vectors_written", collection=name, key=p.key, vectors=written, embedded=sent,
                     ms=round((time.monotonic() - t0) * 1000, 1))

    def _refresh(self, name: str, rag: Any) -> None:
        chunks, docs = rag.pending_summary()
        with self._cv:
            if name not in self._forgotten:
                self.summary[name] = (chunks, docs, rag.document_count())

    def snapshot(self) -> dict[str, Any]:
        """Figures for status: chunks waiting, files searchable by keyword and with vectors, rate."""
        now = time.monotonic()
        recent = [(t, n) for t, n in list(self.recent) if now - t <= 120]
        rate = 0.0
        if len(recent) >= 2:
            rate = sum(n for _, n in recent[1:]) / max(1e-3, recent[-1][0] - recent[0][0])
        summary = dict(self.summary)
        pending = sum(s[0] for s in summary.values())
        docs = sum(s[2] for s in summary.values())
        with self._cv:
            # A collection told about new chunks and not yet looked at may have pending ones.
            running = self._busy or bool(self._dirty)  # (extra-pass backlog: see embed_passes)
        return {"running": running, "pending_chunks": pending, "files_searchable": docs,
                "files_with_vectors": docs - sum(s[1] for s in summary.values()),
                "chunks_per_s": round(rate, 2),
                "eta_s": round(pending / rate, 1) if rate > 0 and pending else (0.0 if not pending else None),
                "vectors_since_start": self.written, "embedded_since_start": self.sent}
