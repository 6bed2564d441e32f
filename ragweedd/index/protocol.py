"""The seam between the vector index and the query layer.

The query layer never reaches an index through module state: whoever builds a searcher passes it
an ``IndexLookup`` (the daemon's live indexes, or the index files a one-shot command loads), and
asks it for the ``VectorIndex`` of a collection. Anything that can answer these three questions
can serve searches: the numba HNSW files today, pgvector in a server backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np

    from ragweedd.store.protocols import RagStore


class VectorIndex(Protocol):
    """One collection's approximate nearest-neighbour index over its primary vectors."""

    @property
    def dim(self) -> int: ...

    def search(self, q: np.ndarray, k: int, ef: int) -> list[tuple[int, float]]:
        """The k labels (chunk ids) most similar to the unit vector q: [(id, dot product)], best first."""
        ...

    def applied_seq(self) -> int:
        """The last change-log sequence number the index contains."""
        ...

    def complete(self, log_seq: int) -> bool:
        """Whether the index holds (nearly) every chunk of a log that ends at ``log_seq``: false
        while a first build runs or when it trails the log by more than an ingest in flight."""
        ...


class IndexLookup(Protocol):
    def index_for(self, rag: RagStore) -> VectorIndex | None:
        """The index of ``rag``'s collection, or None: then the stored vectors are searched exactly."""
        ...
