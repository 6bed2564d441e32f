"""Who holds a claim in a shared PostgreSQL store, and whether it is still alive.

A job being ingested and a chunk being embedded are marked with their claimer, so that no other
process takes them while it works, and every other process takes them once it is gone (kill -9, a
machine lost). A claimer is a number a process draws when it opens the store, and holds as a
session-level advisory lock on a connection it keeps open: the lock exists exactly as long as the
process's session. Liveness is read from ``pg_locks``, which every role may read (unlike other
roles' rows of ``pg_stat_activity``), and a claimer is alive long before any of its claims exist,
so a claim is never judged by a view of the server older than its claimer. A connection that
drops loses the lock until it is opened again (the daemon looks every few seconds), and meanwhile
another process may take that process's running job: both then ingest one file, which ends in the
same state (every write of a file is one transaction, the later one wins), and each one's
finishing touches only the row it claimed. A transaction-mode
pooler between ragweedd and the server would break this (the session is not the process's), so
ragweedd needs direct connections or session pooling (docs/postgres.md).
"""

from __future__ import annotations

import secrets
from typing import Any

from ragweedd.logging import get_logger

log = get_logger("ragweedd.store")

CLAIMER_LOCK_CLASS = 3  # first key of the claimers' advisory locks (1: change log, 2: contents)

# the claimers alive now, as the text stored in claimed_by columns
LIVE_CLAIMERS = ("SELECT objid::text FROM pg_locks WHERE locktype = 'advisory' AND granted"
                 f" AND classid = {CLAIMER_LOCK_CLASS} AND objsubid = 2")


def new_claimer() -> int:
    return secrets.randbelow(2**31 - 2) + 1


def hold(db: Any, claimer: int) -> bool:
    """Take ``claimer``'s lock on ``db``'s session (again, after that connection was opened anew).
    False when another session still holds it: the old session of a connection whose loss the
    server has not noticed yet, which keeps this process's claims alive until it goes."""
    got = db.value("SELECT pg_try_advisory_lock(%s, %s)", (CLAIMER_LOCK_CLASS, claimer))
    if not got:
        log.warning("claimer_lock_held_elsewhere", claimer=claimer,
                    effect="this process's claims stay alive while the server keeps its old session")
    return bool(got)
