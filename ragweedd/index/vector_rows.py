"""Stored vectors (float32 bytes, one per chunk id) as an id array and a row matrix: the one form
the indexes, the exact search and the filtered dense search read them in."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def as_rows(ids: Sequence[int], blobs: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """(int64 ids, float32 matrix with one row per id); a 0 x 0 matrix when there is none."""
    import numpy as np  # numpy loads with the first vector read, not with the modules that import this

    if not len(ids):
        return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
    return (np.asarray(ids, dtype=np.int64),
            np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(ids), -1))
