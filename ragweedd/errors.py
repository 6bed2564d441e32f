"""The one exception tree of ragweedd.

Every error a user can see derives from RagweedError and carries a message that says what went
wrong, with which file or key, and what to do. ``exit_code`` is what the CLI exits with;
``http_status`` is what the API answers with.

    RagweedError
    ├── ConfigError                  bad key / type / value in the TOML file or RAGWEED_* env  (exit 2)
    ├── StorageError                 SQLite problems: locked, migration failed, integrity check failed
    │   ├── CorruptIndexError        an index file failed validation (magic, version, size, checksum)
    │   └── NotCreatedYetError       a reader opened a collection database its writer has not set up yet
    ├── ExtractionError              a file could not be turned into text  -> file state "failed"
    │   ├── ExtractionSkipped        not an error of the file: unsupported/binary/empty -> state "skipped"
    │   ├── ArchiveLimitError        a zip member broke a cap (bytes, ratio, depth, count, path)
    │   ├── SandboxLimitError        the extractor subprocess hit a wall/CPU/memory cap and was killed
    │   └── ToolMissingError         an external binary or model a format needs is not installed
    ├── EmbedderError                the embedder failed (server down, wrong dimension)
    │   └── ModelIntegrityError      a model file's SHA-256 does not match the pinned value
    ├── ProviderError                an LLM provider failed
    │   ├── ProviderAuthError        bad or missing API key
    │   ├── ProviderRateLimited      429 after retries
    │   ├── ProviderTimeout          no answer in time
    │   └── ProviderModelMissing     the model name is unknown to the provider
    ├── InvalidVectorError           a vector/label/query given to an index has the wrong shape or a NaN (400)
    ├── NotFoundError                collection / document / history entry does not exist   (404)
    ├── RequestError                 a bad API or CLI request                               (400)
    └── DaemonError                  daemon-level problems (token file, listen address)
        ├── AlreadyRunningError
        └── RepairingError           the daemon is rebuilding a damaged database; retry shortly (503)
"""

from __future__ import annotations


class RagweedError(Exception):
    exit_code = 1
    http_status = 500
    code = "internal"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message} ({hint})")

    def to_dict(self) -> dict:
        out = {"code": self.code, "message": self.message}
        if self.hint:
            out["hint"] = self.hint
        return out


class ConfigError(RagweedError):
    exit_code = 2
    http_status = 400
    code = "config"


class StorageError(RagweedError):
    code = "storage"


class CorruptIndexError(StorageError):
    code = "corrupt_index"


class NotCreatedYetError(StorageError):
    code = "storage"


class InvalidVectorError(RagweedError):
    """A vector, label or query given to an index has the wrong shape, dimension or a NaN."""

    http_status = 400
    code = "invalid_vector"


class ExtractionError(RagweedError):
    http_status = 422
    code = "extraction_failed"
    # Whether trying the same file again may succeed (the ingest queue reads this). Broken files,
    # caps (the extractor's or a tool's wall time included) and missing tools fail the same way
    # every time; a file that changed while it was read may not.
    retryable = False


class ExtractionSkipped(ExtractionError):
    code = "extraction_skipped"


class ArchiveLimitError(ExtractionError):
    code = "archive_limit"


class SandboxLimitError(ExtractionError):
    code = "sandbox_limit"
    retryable = False  # every cap (wall time, memory, CPU) fails the same way on the same content


class ToolMissingError(ExtractionError):
    code = "tool_missing"


class EmbedderError(RagweedError):
    http_status = 503
    code = "embedder"


class EmbedderMismatchError(EmbedderError):
    """A shared collection's vectors are of another embedder than this process's."""

    http_status = 409
    code = "embedder_mismatch"


class ModelIntegrityError(EmbedderError):
    code = "model_integrity"


class ProviderError(RagweedError):
    http_status = 502
    code = "provider"


class ProviderAuthError(ProviderError):
    code = "provider_auth"


class ProviderRateLimited(ProviderError):
    http_status = 429
    code = "provider_rate_limited"


class ProviderTimeout(ProviderError):
    http_status = 504
    code = "provider_timeout"


class ProviderModelMissing(ProviderError):
    code = "provider_model_missing"


class NotFoundError(RagweedError):
    http_status = 404
    code = "not_found"


class RequestError(RagweedError):
    http_status = 400
    exit_code = 2
    code = "bad_request"


class DaemonError(RagweedError):
    code = "daemon"


class AlreadyRunningError(DaemonError):
    code = "already_running"


class RepairingError(DaemonError):
    http_status = 503
    code = "repairing"
