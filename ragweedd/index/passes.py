"""The index files of the extra embedding passes (``data_level0_384.bin``, ...; DESIGN §3, §6).

They live in the collection's IndexManager beside the primary index and follow the same
durability rule, against the pass's own change log (``pass_changes`` in rag.sqlite3, written by
triggers whenever a pass vector is stored or removed): at start each is replayed from its
``applied_seq`` or rebuilt from the stored vectors of its space when missing, corrupt or ahead of
the database; afterwards every sync applies the changes logged after it. The database stays the
source of truth: deleting these files only costs a rebuild.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragweedd.index.vector_rows import as_rows
from ragweedd.logging import get_logger

if TYPE_CHECKING:
    from collections.abc import Iterator

    import numpy as np

log = get_logger("ragweedd.index")
APPLY_BATCH = 5000


def prepare_pass(m: Any, rag: Any, space: str) -> None:
    """At load: rebuild the pass's index from its stored vectors when its file cannot be replayed."""
    max_seq = rag.pass_max_seq(space)
    # The pass log is never trimmed, so any older file can be replayed (no log_min_seq).
    plan = m.plan(space, max_seq, None)
    if plan == "rebuild" or (m.status[space] == "new" and max_seq > 0):
        log.info("index_rebuild", collection=rag.collection, space=space, reason=m.status[space],
                 applied_seq=m.applied_seq[space], log_seq=max_seq)
        if m.applied_seq[space] > max_seq:
            m.applied_seq[space] = max_seq  # the database lost its newest pass changes: see IndexSync
        m.rebuild(space, _batches(rag, space), max_seq)


def sync_pass(m: Any, rag: Any, space: str) -> int:
    """Apply every change of the pass's log newer than its index; returns how many were applied."""
    import numpy as np

    total = 0
    while True:
        changes = rag.pass_changes_after(space, m.applied_seq[space], APPLY_BATCH)
        if not changes:
            return total
        vecs = rag.vectors_for([c[2] for c in changes if c[1] == "add"], space)
        items = []
        for seq, op, cid in changes:
            blob = vecs.get(cid) if op == "add" else None
            # an add whose vector is gone again: its delete follows in the log
            items.append((seq, "add", cid, np.frombuffer(blob, dtype=np.float32)) if blob else (seq, "delete", cid))
        total += m.apply(space, items)


def _batches(rag: Any, space: str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    for ids, blobs in rag.iter_vectors(space):
        yield as_rows(ids, blobs)
