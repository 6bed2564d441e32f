"""A data directory's collection answering the seam's questions about stores several machines share.

One machine writes it and one process embeds it, so there is no other machine's path to match, no
claim on a chunk to give back, no other daemon's model to refuse, and its vectors are ranked by the
index files (ragweedd/index/), not by the database.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable


class OneMachine:
    """Mixed into RagDB."""

    if TYPE_CHECKING:
        def document_paths(self) -> list[tuple[str, str, str]]: ...

    def every_document_path(self) -> list[tuple[str, str, str]]:
        return self.document_paths()

    def check_embedder(self, embedder_id: str) -> None:
        # a changed model is met at start, where the collection is embedded again or moved
        # beside the old one (ragweedd/ingest/model_swap.py), before any vector is written
        return None

    def release_claims(self) -> int:
        return 0

    def nearest(self, q: Any, k: int, *, space: str = "primary", allowed: Iterable[int] | None = None,
                ef: int | None = None) -> list[tuple[int, float]] | None:
        return None
