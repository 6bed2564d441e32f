"""The job queue moved to ragweedd/store/job_queue.py (it is a store of jobs); this name stays only
until daemon.py imports it from there."""

from ragweedd.store.job_queue import BACKOFF_BASE_S, BACKOFF_MAX_S, Job, JobQueue  # noqa: F401
