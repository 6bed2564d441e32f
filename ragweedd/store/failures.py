"""What a storage failure means, whichever backend raised it.

The ingest worker, the watcher and the engine decide from an exception whether to wait and retry
(a full disk, a database server out of reach) or to repair (a damaged file). Each backend knows its
own errors; this module is where the layers above ``store/`` ask, so none of them imports a
backend's modules to classify an exception.
"""

from __future__ import annotations

from ragweedd.store.postgres.connection import server_unreachable
from ragweedd.store.sqlite.connection import damage_in, is_disk_full

__all__ = ["damage_in", "is_disk_full", "server_unreachable"]
