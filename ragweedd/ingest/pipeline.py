"""The per-file ingest pipeline: stat -> md5 -> extract -> chunk -> publish, then vectors.

Content identity is the MD5 of the bytes (as RAGWeed). Content already indexed in the collection is
never extracted or embedded again: a rename or copy only adds a path. A path whose content changed
supersedes its old content in the same rag.sqlite3 transaction that adds the new chunks.

A file's chunks are published as soon as it is extracted, with the vectors the embed cache already
holds (keyed by the hash of what is embedded: the chunk's context line and text); the others are
left pending for the embedding stage (ingest/vectorize.py), which the daemon runs in a thread of
its own so extraction and embedding overlap. Without that thread (``defer_vectors=False``: the
one-shot CLI, tests of the pipeline alone) the pipeline fills them itself right after publishing.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import time
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, TypedDict

from ragweedd.chunk.chunker import ChunkParams, chunk_document, iter_chunks, text_hash
from ragweedd.chunk.context import context_line, document_label, embed_input, index_embedder_id
from ragweedd.errors import ExtractionError, ExtractionSkipped, Interrupted
from ragweedd.extract.base import ExtractedDoc, ExtractSettings
from ragweedd.extract.registry import extract_file, extractor_for
from ragweedd.extract.text import STREAM_ABOVE_BYTES, TextExtractor, TextStream
from ragweedd.files.skip_rules import cap_lifted, skip_reason, stat_unchanged
from ragweedd.ingest.safe_open import NotRegularFile, fd_md5, open_regular, private_copy
from ragweedd.ingest.vectorize import fill_vectors
from ragweedd.logging import get_logger
from ragweedd.paths import Paths, within
from ragweedd.store.types import PRIMARY, ChunkRecord

if TYPE_CHECKING:
    from ragweedd.config import Config
    from ragweedd.embed.base import Embedder
    from ragweedd.store.protocols import RagStore, StoreBackend
    from ragweedd.store.types import Row

log = get_logger("ragweedd.ingest")

ExtractFn = Callable[[Path, ExtractSettings], ExtractedDoc]


class _StatKw(TypedDict):
    """What every ingest row of a file records of its stat (keywords of ``IngestStore.set_file``)."""

    size: int
    mtime_ns: int
    inode: int
    root: str | None


@dataclass
class FileOutcome:
    path: str
    status: str  # indexed | unchanged | linked | skipped | failed
    md5: str | None = None
    chunks: int = 0
    embedded: int = 0  # chunk texts sent to the embedder (cache misses)
    pending: int = 0  # chunks published without a vector (the embedding stage computes them)
    dropped: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    retryable: bool = False
    seconds: float = 0.0
    index_changed: bool = True  # False: nothing in the collection's index changed (no change-log entry)


def file_md5(path: Path, bufsize: int = 1 << 20) -> str:
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        while chunk := f.read(bufsize):
            h.update(chunk)
    return h.hexdigest()


def _renamed(e: ExtractionError, copy: str, src: str) -> ExtractionError:
    """The extractor's error about the private copy, told about the user's file."""
    out = type(e)(e.message.replace(copy, src), hint=e.hint)
    out.__dict__.update({k: v for k, v in e.__dict__.items() if k not in ("message", "hint")})
    return out


def in_process_extract(path: Path, settings: ExtractSettings) -> ExtractedDoc:
    return extract_file(path, settings)




def _streams(src: str, size: int) -> bool:
    """Whether the file is read, chunked and published piece by piece (a large plain-text file)."""

    return size > STREAM_ABOVE_BYTES and isinstance(extractor_for(Path(src)), TextExtractor)


class Pipeline:
    """Ingests files of any collection. One Pipeline is the single writer of its databases."""

    def __init__(self, cfg: Config, paths: Paths, embedder: Embedder, *, extract: ExtractFn | None = None,
                 should_stop: Callable[[], bool] | None = None, defer_vectors: bool = False,
                 stores: StoreBackend) -> None:
        """``should_stop()`` is asked between embedding batches; when it says True the ingest
        raises :class:`Interrupted`.
        ``defer_vectors``: leave the vectors missing from the embed cache to the embedding stage.
        ``stores``: the backend to write to (the composition root opens it; ragweedd/services.py)."""
        self.defer_vectors = defer_vectors
        self.should_stop = should_stop
        self.cfg = cfg
        self.paths = paths.ensure()
        self.embedder = embedder
        self.extract = extract or in_process_extract
        self.settings = ExtractSettings.from_config(cfg, self.paths.scratch)
        self.stores: StoreBackend = stores
        self.db = self.stores.open_ingest()
        self._rags: dict[str, RagStore] = {}
        self._rag_ids: dict[str, Hashable] = {}  # what each open store was opened on (rag_identity)
        self.seen_removals = 0  # how many of the workers' removed collections this pipeline let go of
        self.params = ChunkParams.for_embedder(cfg, embedder)
        self.with_context = bool(getattr(cfg, "chunk_context", False))
        # The id a collection's vectors are recorded under: the model and what it was given to read.
        self.index_id = index_embedder_id(embedder.id, self.with_context)

    def close(self) -> None:
        for r in self._rags.values():
            r.close()
        self._rags.clear()
        self.db.close()

    def forget(self, collection: str) -> None:
        """Close what this pipeline holds of a removed collection."""
        r = self._rags.pop(collection, None)
        self._rag_ids.pop(collection, None)
        if r is not None:
            r.close()

    def rag(self, collection: str) -> RagStore:
        r = self._rags.get(collection)
        now = self.stores.rag_identity(collection)
        if r is not None and (now is None or now != self._rag_ids.get(collection)):
            # the collection was removed (its database deleted), maybe added again under the same
            # name: this handle points at the store that was removed
            r.close()
            r = None
        if r is None:
            r = self._rags[collection] = self.stores.open_rag(collection)
            self._rag_ids[collection] = self.stores.rag_identity(collection)
            self._check_embedder(collection, r)
        return r

    def _check_embedder(self, collection: str, r: Any) -> None:
        known = r.embedder(PRIMARY)
        if known is None:
            r.set_embedder(self.index_id, self.embedder.dim, PRIMARY)
        elif known[0] != self.index_id:
            log.warning("collection_embedder_changed", collection=collection, stored=known[0],
                        configured=self.index_id)

    # --- one file ---------------------------------------------------------------------------------
    def ingest_file(self, collection: str, path: Path | str, root: Path | str | None = None,
                    *, force: bool = False) -> FileOutcome:
        t0 = time.monotonic()
        path = Path(path).absolute()
        src = str(path)
        rel = os.path.relpath(src, root) if root else path.name
        try:
            os.lstat(src)
            fd = open_regular(src, str(root) if root else None)
        except FileNotFoundError:
            self.remove_file(collection, src)
            return FileOutcome(src, "skipped", error="file vanished before it was read")
        except NotRegularFile as e:
            # Never index what a link points to under this path: the path's old content leaves.
            self.remove_file(collection, src)
            return self._done(FileOutcome(src, "skipped", error=str(e)), t0, collection)
        try:
            out = self._ingest_fd(collection, src, rel, root, fd, force, t0)
        finally:
            os.close(fd)
        if out.status in ("unchanged", "linked"):
            # Published before a crash, its vectors still to compute: without an embedding stage,
            # the next look at the file is when they get done.
            out.embedded += self._fill_now(collection)
        return out

    def _ingest_fd(self, collection: str, src: str, rel: str, root: Path | str | None, fd: int, force: bool,
                   t0: float) -> FileOutcome:
        st = os.fstat(fd)
        row = self.db.live_file(collection, src)
        if (not force and row is not None and row["extract_status"] in ("done", "skipped")
                and stat_unchanged(row, st) and not cap_lifted(row, src, st.st_size, self.cfg)):
            return FileOutcome(src, "unchanged", md5=row["md5"], chunks=row["chunks"])
        stat_kw = _StatKw(size=st.st_size, mtime_ns=st.st_mtime_ns, inode=st.st_ino, root=str(root) if root else None)
        skip = self._skip_from_stat(src, st.st_size, self.cfg)
        if skip is not None:
            return self._skip_cheaply(collection, src, row, skip, stat_kw, t0)
        md5 = fd_md5(fd)
        rag = self.rag(collection)
        if row is not None and row["md5"] == md5 and row["extract_status"] in ("done", "skipped") and not force:
            self.db.set_file(collection, src, md5=md5, status=row["extract_status"], chunks=row["chunks"],
                             error=row["error"], **stat_kw)
            return self._done(FileOutcome(src, "unchanged", md5=md5, chunks=row["chunks"]), t0, collection)
        if (row is not None and row["md5"] == md5 and row["extract_status"] == "failed" and not force
                and (row["tries"] or 0) >= self.cfg.extract_max_tries):
            # This content already failed for good (a broken file, a cap, a parser killed at its wall
            # time): trying it again would fail the same way, so only new content is tried again.
            self.db.set_file(collection, src, md5=md5, status="failed", error=row["error"], tries=row["tries"],
                             **stat_kw)
            return self._done(FileOutcome(src, "failed", md5=md5, error=row["error"]), t0, collection)
        again: list[str] | None = None
        if rag.has_document(md5):
            if not force:
                rag.link_path(md5, src, rel)
                n = rag.chunks_of(md5)
                self.db.set_file(collection, src, md5=md5, status="done", chunks=n, **stat_kw)
                return self._done(FileOutcome(src, "linked", md5=md5, chunks=n), t0, collection)
            again = rag.paths_of(md5)  # extracted again: its chunks are replaced for every path

        tries = (row["tries"] if row is not None and row["md5"] == md5 else 0) + 1
        self.db.set_file(collection, src, md5=md5, status="extracting", tries=tries, **stat_kw)
        streamed = _streams(src, st.st_size)
        try:
            with private_copy(fd, os.path.basename(src), self.settings.scratch_dir) as (copy, copy_md5):
                if copy_md5 != md5:
                    err = ExtractionError(f"{src}: the file changed while it was read",
                                          hint="it is read again once it stops changing")
                    err.retryable = True
                    raise err
                try:
                    if streamed:
                        held = self._take_again(rag, collection, md5, again, src)
                        out = self._ingest_streamed(collection, src, rel, copy, md5, tries, st.st_size, stat_kw, t0)
                        self._give_back(rag, collection, md5, held, root)
                        return out
                    doc = self.extract(copy, self.settings)
                except ExtractionError as e:
                    raise _renamed(e, str(copy), src) from None
                except Interrupted:
                    # Stopping is not a try: the row keeps the count it had; the job is given back.
                    self.db.set_file(collection, src, md5=md5, status="extracting", tries=tries - 1, **stat_kw)
                    raise
            if not doc.text.strip():
                raise ExtractionSkipped(f"{src}: no text could be extracted")
            result = chunk_document(doc, self.params)
            if not result.chunks:
                raise ExtractionSkipped(
                    f"{src}: every chunk was dropped by the entropy filter {result.dropped}",
                    hint="the file holds no readable text")
        except ExtractionError as e:
            status = "skipped" if isinstance(e, ExtractionSkipped) else "failed"
            # The path's old content (if any) no longer describes the file: it leaves the index.
            rag.remove_path(src)
            if status == "failed" and not getattr(e, "retryable", False):
                tries = max(tries, self.cfg.extract_max_tries)  # failed for good: see the check above
            self.db.set_file(collection, src, md5=md5, status=status, error=str(e), tries=tries, **stat_kw)
            out = FileOutcome(src, status, md5=md5, error=str(e), retryable=getattr(e, "retryable", False))
            return self._done(out, t0, collection)

        result.chunks = list(self.add_context(result.chunks, src, doc.title))
        vectors = self._cached(result.chunks)
        held = self._take_again(rag, collection, md5, again, src)
        rag.publish(md5=md5, source_file=src, rel_path=rel, kind=doc.kind, extractor=doc.extractor,
                    ocr_type=doc.ocr_type, title=doc.title, size_bytes=st.st_size, chunks=result.chunks,
                    vectors={PRIMARY: vectors}, embedders={PRIMARY: (self.index_id, self.embedder.dim)})
        self._give_back(rag, collection, md5, held, root)
        self.db.record_collection_chunks(collection, md5, len(result.chunks))
        self.db.set_file(collection, src, md5=md5, status="done", chunks=len(result.chunks), tries=tries, **stat_kw)
        out = FileOutcome(src, "indexed", md5=md5, chunks=len(result.chunks), dropped=result.dropped,
                          pending=sum(v is None for v in vectors))
        out.embedded = self._fill_now(collection)
        return self._done(out, t0, collection)

    def _take_again(self, rag: Any, collection: str, md5: str, again: list[str] | None,
                    src: str) -> list[tuple[str, Any]]:
        """Content extracted again (``ingest --force``): its old chunks leave, with every path
        that held them, just before the new ones are published; the other paths' rows are marked
        unread first, so a crash before ``_give_back`` has them read again at the next start.
        Returns those paths but ``src`` (the one being published) with their rows."""
        if again is None:
            return []
        held = []
        for path in again:
            row = None if path == src else self.db.live_file(collection, path)
            if row is not None and row["md5"] == md5 and row["extract_status"] == "done":
                held.append((path, row))
        for path, row in held:
            self.db.set_file(collection, path, md5=md5, size=row["size_bytes"], mtime_ns=row["mtime_ns"],
                             inode=row["inode"], status="extracting", chunks=row["chunks"])
        for path in again:
            rag.remove_path(path)
        return held

    def _give_back(self, rag: Any, collection: str, md5: str, held: list[tuple[str, Any]],
                   root: Path | str | None) -> None:
        """The paths ``_take_again`` took hold the new chunks."""
        n = rag.chunks_of(md5) if held else 0
        for path, row in held:
            under = root is not None and within(path, str(root), strictly=True)
            rag.link_path(md5, path, os.path.relpath(path, root) if under else os.path.basename(path))
            self.db.set_file(collection, path, md5=md5, size=row["size_bytes"], mtime_ns=row["mtime_ns"],
                             inode=row["inode"], status="done", chunks=n)

    def add_context(self, chunks: Iterable[ChunkRecord], src: str, title: str | None) -> Iterator[ChunkRecord]:
        """Each chunk, as it is given its context line (when enabled) and the hash of what is
        embedded; the document's label is worked out once, also for a file chunked as a stream."""
        label = document_label(src, title) if self.with_context else ""
        for c in chunks:
            if self.with_context:
                meta = c["meta"]
                c["context"] = context_line(label, meta.get("section_path"), meta.get("section"),
                                            meta.get("table_title"))
            c["embed_hash"] = text_hash(embed_input(c["text"], c.get("context"))) if c.get("context") \
                else c["text_hash"]
            yield c

    def _cached(self, chunks: list[ChunkRecord]) -> list[bytes | None]:
        """Each chunk's vector from the embed cache, None where it must be computed."""
        have = self.db.cached_vectors(self.embedder.id, [c["embed_hash"] for c in chunks])
        return [have.get(c["embed_hash"]) for c in chunks]

    def _fill_now(self, collection: str) -> int:
        """Without an embedding stage: compute the collection's pending vectors now. Returns the
        texts sent to the embedder."""
        if self.defer_vectors:
            return 0
        return fill_vectors(self.rag(collection), self.db, self.embedder, self.index_id,
                            batch_size=self.cfg.embed_batch_size, should_stop=self.should_stop)[1]

    def _ingest_streamed(self, collection: str, src: str, rel: str, copy: Path, md5: str, tries: int,
                         size: int, stat_kw: _StatKw, t0: float) -> FileOutcome:
        """A large text file in bounded memory: chunked piece by piece and staged batch by batch
        with the vectors the embed cache holds, the others left pending (see the module
        docstring). Nothing holds the text, its chunks or their vectors: memory stays at a few
        pieces and one batch whatever the size (the file itself is capped by ingest_max_text_mb).
        The chunks are those ``chunk_document`` makes of the whole text (the same splitter)."""

        stream = TextStream(copy)
        dropped: dict[str, int] = {}
        counts = {"chunks": 0, "pending": 0}

        def counted() -> Iterator[ChunkRecord]:
            for c in self.add_context(iter_chunks(stream.pieces(), stream.kind, stream.regions, self.params,
                                                  dropped), src, stream.title):
                counts["chunks"] += 1
                yield c

        chunks, vectors = self._cached_pairs(counted(), counts)
        # Staged batch by batch and swapped in whole (store/sqlite/rag_stage.py): other files' publishes
        # and searches go on meanwhile.
        log.info("publish_staging", collection=collection, path=src, size=size)
        self.rag(collection).publish(
            md5=md5, source_file=src, rel_path=rel, kind=stream.kind, extractor=stream.extractor,
            ocr_type=stream.ocr_type, title=stream.title, size_bytes=size, chunks=chunks,
            vectors={PRIMARY: vectors}, embedders={PRIMARY: (self.index_id, self.embedder.dim)},
            should_stop=self.should_stop)
        n = counts["chunks"]
        if not n:  # the document row publish wrote leaves with the skip (the caller removes the path)
            if dropped:
                raise ExtractionSkipped(f"{src}: every chunk was dropped by the entropy filter {dropped}",
                                        hint="the file holds no readable text")
            raise ExtractionSkipped(f"{src}: no text could be extracted")
        self.db.record_collection_chunks(collection, md5, n)
        self.db.set_file(collection, src, md5=md5, status="done", chunks=n, tries=tries, **stat_kw)
        out = FileOutcome(src, "indexed", md5=md5, chunks=n, dropped=dropped, pending=counts["pending"])
        out.embedded = self._fill_now(collection)
        return self._done(out, t0, collection)

    def _cached_pairs(self, chunks: Iterator[ChunkRecord], counts: dict[str, int],
                      batch: int = 500) -> tuple[Iterator[ChunkRecord], Iterator[bytes | None]]:
        """Two iterators for ``RagDB.publish``: the chunks, and their vectors from the embed cache
        (None where missing), looked up a batch at a time as the chunks are drawn (publish draws a
        chunk, then its vector)."""
        eid = self.embedder.id
        ready: deque[bytes | None] = deque()

        def chunk_iter() -> Iterator[ChunkRecord]:
            part: list[ChunkRecord] = []
            for c in itertools.chain(chunks, [None]):
                if c is not None:
                    part.append(c)
                if part and (c is None or len(part) >= batch):
                    if self.should_stop is not None and self.should_stop():
                        # publish is still staging: raising leaves the collection untouched
                        raise Interrupted("stopped while publishing a large file")
                    have = self.db.cached_vectors(eid, [x["embed_hash"] for x in part])
                    got = [have.get(x["embed_hash"]) for x in part]
                    counts["pending"] += sum(v is None for v in got)
                    ready.extend(got)
                    yield from part
                    part = []

        def vector_iter() -> Iterator[bytes | None]:
            while True:  # never empty when drawn: its chunk was drawn first, with its whole batch
                yield ready.popleft()

        return chunk_iter(), vector_iter()

    @staticmethod
    def _skip_from_stat(src: str, size: int, cfg: Config) -> tuple[str | None, str] | None:
        return skip_reason(src, size, cfg)

    def _skip_cheaply(self, collection: str, src: str, row: Row | None, skip: tuple[str | None, str], stat_kw: _StatKw,
                      t0: float) -> FileOutcome:
        """Record a skip decided from the stat: one row, no read, copy, extraction or index work,
        unless the path held indexed content before (then that content leaves the index)."""
        md5, reason = skip
        changed = False
        if row is not None and row["extract_status"] != "skipped":
            changed = bool(self.remove_file_content(collection, src))
        self.db.set_file(collection, src, md5=md5, status="skipped", error=reason, **stat_kw)
        out = FileOutcome(src, "skipped", md5=md5, error=reason, index_changed=changed)
        return self._done(out, t0, collection)

    def remove_file_content(self, collection: str, src: str) -> list[int]:
        """The path's indexed content (if any) leaves the index; its ingest row stays."""
        md5, ids = self.rag(collection).remove_path(src)
        if ids and md5:
            self.db.forget_collection_chunks(collection, md5)
        return ids

    def remove_file(self, collection: str, source_file: str) -> list[int]:
        """A path is gone: forget it; its content leaves the index unless another path holds it."""
        md5 = self.db.mark_deleted(collection, source_file)
        _, ids = self.rag(collection).remove_path(source_file)
        if ids and md5:
            self.db.forget_collection_chunks(collection, md5)
        return ids

    def _done(self, out: FileOutcome, t0: float, collection: str) -> FileOutcome:
        out.seconds = time.monotonic() - t0
        # One line per ingest job (the daemon and the CLI both log through here).
        log.info("ingest_file", collection=collection, path=out.path, status=out.status, chunks=out.chunks,
                 embedded=out.embedded, vectors_pending=out.pending, error=out.error,
                 ms=round(out.seconds * 1000, 1))
        return out
