"""The one exception tree of ragweedd.

Every error a user can see derives from RagweedError and carries a message that says what went
wrong, with which file or key, and what to do. ``exit_code`` is what the CLI exits with;
``http_status`` is what the API answers with.

    RagweedError
    ├── ConfigError                  bad key / type / value in the TOML file or RAGWEED_* env  (exit 2)
    │   └── KeyFileError             keys.toml cannot be used: its mode, owner or syntax
    ├── StorageError                 SQLite problems: locked, migration failed, integrity check failed
    │   ├── StoreUnreachableError    the database server cannot be reached now
    │   ├── CorruptIndexError        an index file failed validation (magic, version, size, checksum)
    │   └── NotCreatedYetError       a reader opened a collection database its writer has not set up yet
    ├── ExtractionError              a file could not be turned into text  -> file state "failed"
    │   ├── ExtractionSkipped        not an error of the file: unsupported/binary/empty -> state "skipped"
    │   │   └── NotRegularFile       the path is (now) a symlink, a folder, a FIFO: never followed
    │   ├── ArchiveLimitError        a zip member broke a cap (bytes, ratio, depth, count, path)
    │   ├── SandboxLimitError        the extractor subprocess hit a wall/CPU/memory cap and was killed
    │   └── ToolMissingError         an external binary or model a format needs is not installed
    ├── EmbedderError                the embedder failed (server down, wrong dimension)
    │   ├── EmbedderMismatchError    a shared collection's vectors are of another embedder    (409)
    │   └── ModelIntegrityError      a model file's SHA-256 does not match the pinned value
    ├── ProviderError                an LLM provider failed
    │   ├── ProviderAuthError        bad or missing API key
    │   ├── ProviderRateLimited      429 after retries
    │   ├── ProviderTimeout          no answer in time
    │   ├── ProviderModelMissing     the model name is unknown to the provider
    │   ├── BadOutput                the rerank model's reply holds no score for some passage, or no yes/no
    │   ├── PickError                tree mode: the model's pick is not the JSON asked for
    │   └── JudgeError               the eval judge's reply is not the JSON asked for
    ├── InvalidVectorError           a vector/label/query given to an index has the wrong shape or a NaN (400)
    ├── NotFoundError                collection / document / history entry does not exist   (404)
    ├── RequestError                 a bad API or CLI request                               (400)
    │   └── UsageError               a command line argparse refuses             [cli/exits.py]
    ├── SignInRefused                a used, expired or unknown web UI sign-in code          (403)
    ├── AnswersBusy                  every answer slot is taken; retry shortly   [api/sse.py] (429)
    ├── Interrupted                  work stopped between two batches: the daemon is stopping
    │   └── EmbedStopped             ``should_stop()`` said so between two embedding batches
    ├── CtlError                     an error as ragweedctl shows it, often the daemon's envelope [cli/ctl_http.py]
    ├── InternalError                one part of ragweedd called another against its rule: a bug (500)
    └── DaemonError                  daemon-level problems (token file, listen address)
        ├── AlreadyRunningError
        ├── RepairingError           the daemon is rebuilding a damaged database; retry shortly (503)
        └── ServiceError             `ragweedctl service` cannot install, remove or ask

Every class is defined here, except (in [brackets]) one that carries the behaviour of the module
that raises it (how a face answers it, what argparse gave it), and a signal private to one module
(``_Stopping``...); those still derive from a class here, so ``except RagweedError`` and the faces'
wording see every error the same way. tests/unit/test_error_tree.py walks the package and checks
both that and that this drawing names every public class.

What to do about an error is often said differently on each face: a person at ragweedctl runs
``ragweedctl collections``, an HTTP client GETs /v1/collections, an assistant over MCP calls the
``list_collections`` tool. Such an error carries an *action* (an id of FIXES and its arguments)
instead of a worded hint; each face words it with ``hint_for(face, ...)``. The message, what went
wrong and with which collection, file or key, is worded once where the error is raised. The API's
error envelope carries both: ``hint`` in the API's words and ``action`` for the clients
(ragweedctl, ``ragweedctl mcp``) that word it in their own.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # not typing.TYPE_CHECKING: ragweedctl loads this module and never typing
    from typing import Any

# The faces that word a hint: "api" the HTTP API (and the web UI that shows its envelope), "ctl"
# ragweedctl, "cli" ragweedd's one-shot commands, "mcp" both MCP transports (stdio and /mcp).
FACES = ("api", "ctl", "cli", "mcp")

# action id -> face -> words; {name} and the like are the action's arguments. A face missing from an
# action's table uses its "api" words ("cli" uses "ctl"'s first).
FIXES: dict[str, dict[str, str]] = {
    "list_collections": {
        "api": "list them with GET /v1/collections",
        "ctl": "list them with `ragweedctl collections`",
        "mcp": "list them with the `list_collections` tool",
    },
    "list_documents": {
        "api": "document keys come from GET /v1/documents",
        "ctl": "list documents and their keys with `ragweedctl docs`",
        "mcp": "pass a `search` hit's doc_key, or the file's path",
    },
    "list_history": {
        "api": "list entries with GET /v1/history",
        "ctl": "list them with `ragweedctl history`",
        "mcp": "history ids come from `ask` answers (history_id)",
    },
    "list_conversations": {
        "api": "list them with GET /v1/conversations; ask without a conversation_id to start a new one",
        "ctl": "list them with `ragweedctl history --threads`; ask without --conversation to start a new one",
        "mcp": "conversation ids come from `ask` answers (conversation_id); leave it out to start a new one",
    },
    "start_daemon": {
        "api": "start it with `ragweedd run`, or install it as a service with `ragweedctl service install`",
        "ctl": "start it with `ragweedd run`, or install it as a service with `ragweedctl service install`",
        "mcp": "the user must start it (`ragweedd run`, or `ragweedctl service install`); then call the tool again",
    },
    "wait_for_indexing": {
        "api": "files still being read are searchable in moments (GET /v1/status shows the progress); an empty "
               "collection needs files in its folders",
        "ctl": "files still being read are searchable in moments (`ragweedctl status` shows the progress); an "
               "empty collection needs files in its folders",
        "mcp": "files still being read are searchable in moments (the `status` tool shows the progress); an "
               "empty collection needs files in its folders",
    },
    "add_collection": {
        "api": "add a collection of folders with POST /v1/collections",
        "ctl": "add a collection of folders with `ragweedctl add NAME FOLDER`",
        "cli": "index a folder with `ragweedd ingest FOLDER --collection NAME`",
        "mcp": "the user adds a collection of folders with `ragweedctl add NAME FOLDER` (or the "
               "`add_collection` tool, where writes are allowed)",
    },
    "collection_name_taken": {
        "api": "choose another name, or remove it first (an HTTP delete of /v1/collections/{name})",
        "ctl": "choose another name, or remove it first with `ragweedctl remove {name}`",
        "mcp": "choose another name (the `list_collections` tool shows the names taken)",
    },
}


def hint_for(face: str, action: object = None, hint: str | None = None) -> str | None:
    """The hint in ``face``'s words: the action's, when it is one of FIXES with all its arguments,
    else ``hint`` as given. ``action`` is an error's own or the ``action`` of an API error envelope
    (read from the wire: anything not of the shape is ignored)."""
    if isinstance(action, dict):
        action_id = action.get("id")
        words = FIXES.get(action_id) if isinstance(action_id, str) else None
        args = action.get("args") or {}
        if words is not None and isinstance(args, dict) and all(isinstance(v, str) for v in args.values()):
            text = words.get(face) or (words.get("ctl") if face == "cli" else None) or words["api"]
            try:
                return text.format_map(args)
            except (KeyError, ValueError, IndexError):
                pass
    return hint or None


def say(face: str, message: str, hint: str | None = None, action: object = None) -> str:
    """An error as one face shows it to a person or a model: what went wrong, then what to do."""
    h = hint_for(face, action, hint)
    return f"{message} — {h}" if h else message


class RagweedError(Exception):
    exit_code = 1
    http_status = 500
    code = "internal"

    def __init__(self, message: str, *, hint: str | None = None, action: str | None = None,
                 **args: str) -> None:
        """``action``: an id of FIXES, with its arguments as keywords; ``hint`` then defaults to the
        API's words for it."""
        self.message = message
        self.action: dict[str, Any] | None = None
        if action is not None:
            if action not in FIXES:
                raise InternalError(f"no hint words for action {action!r} in ragweedd.errors.FIXES")
            self.action = {"id": action, "args": args} if args else {"id": action}
        self.hint = hint if hint is not None else hint_for("api", self.action)
        super().__init__(message if self.hint is None else f"{message} ({self.hint})")

    def hint_in(self, face: str) -> str | None:
        return hint_for(face, self.action, self.hint)

    def say(self, face: str) -> str:
        return say(face, self.message, self.hint, self.action)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.hint:
            out["hint"] = self.hint
        if self.action:
            out["action"] = self.action
        return out


class ConfigError(RagweedError):
    exit_code = 2
    http_status = 400
    code = "config"


class KeyFileError(ConfigError):
    """The keys file (ragweedd/keyfile.py) exists but cannot be used: group or others may read it,
    another user owns it, it is not a regular file, or it is not valid. Its keys are then not used."""

    code = "keys_file"


class StorageError(RagweedError):
    code = "storage"


class StoreUnreachableError(StorageError):
    """The database server cannot be reached now: a lost or refused connection, a server shutting
    down or starting up. Says nothing about the file or query at hand: the work is worth doing again
    once the server answers."""


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
    # Set by the extraction sandbox: the child's peak resident MiB, and the cap it hit ("wall",
    # "memory", "cpu") when that is what stopped it.
    peak_rss_mb: float | None = None
    limit: str | None = None


class ExtractionSkipped(ExtractionError):
    code = "extraction_skipped"


class NotRegularFile(ExtractionSkipped):
    """The path is (now) a symlink, a folder, a FIFO or device, or a folder on the way is a symlink:
    ingest never reads what it points to (ragweedd/ingest/safe_open.py)."""

    code = "not_regular_file"


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
    # seconds the provider asked to wait, when an adapter read it (BaseProvider backs off at least that)
    retry_after: float | None = None


class ProviderTimeout(ProviderError):
    http_status = 504
    code = "provider_timeout"


class ProviderModelMissing(ProviderError):
    code = "provider_model_missing"


class BadOutput(ProviderError):
    """The rerank model answered, but not in a form the stage can read; the search keeps its order."""

    code = "rerank_bad_output"


class PickError(ProviderError):
    """Tree mode: the model's reply names no document or section of those offered, or is not the
    JSON asked for. The answer then falls back to plain retrieval."""

    code = "unreadable_reply"


class JudgeError(ProviderError):
    """The eval judge's reply is not the JSON asked for; the metric is recorded as failed."""

    code = "unreadable_reply"


class NotFoundError(RagweedError):
    http_status = 404
    code = "not_found"


class RequestError(RagweedError):
    http_status = 400
    exit_code = 2
    code = "bad_request"


class SignInRefused(RagweedError):
    """A web UI sign-in code that is used, expired or unknown."""

    http_status = 403
    code = "sign_in_refused"


class Interrupted(RagweedError):
    """Work stopped between two batches (of embeddings, of copied chunks, of an index rebuild)
    because the daemon is stopping.

    Nothing is wrong with the file: what was written is complete (whole batches), and the rest
    stays pending (or its job goes back to the queue) for the next run."""

    code = "interrupted"


class EmbedStopped(Interrupted):
    """``should_stop()`` said True between two embedding batches of one ``embed_texts`` call;
    nothing of that call is returned."""


class InternalError(RagweedError, ValueError):
    """One part of ragweedd called another against its rule (an index suffix of the wrong form, a
    primary vector handed to the extra-pass writer): a bug to report, never the user's input. A
    ValueError too, as the standard library would have it, for callers that check arguments."""

    code = "internal"


class DaemonError(RagweedError):
    code = "daemon"


class AlreadyRunningError(DaemonError):
    code = "already_running"


class RepairingError(DaemonError):
    http_status = 503
    code = "repairing"


class ServiceError(DaemonError):
    """``ragweedctl service``: the systemd unit or launchd agent cannot be installed, removed or
    asked about. ``exit_code`` is 2 when the command line named something that is not there."""

    code = "service"

    def __init__(self, message: str, exit_code: int = 1, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.exit_code = exit_code
