"""Extra embedding passes (DESIGN §6, §8): ``multi_embed_384`` and ``multi_embed_1024``.

Each key names a second (third) embedder in the same form as ``embed.model`` (``ollama:all-minilm``,
``ollama:mxbai-embed-large``, ``local:all-minilm-l6-v2`` beside an Ollama primary). Its vectors are
stored beside the primary's in the collection database under the space "384" / "1024" and indexed
in their own files (``data_level0_384.bin``, ...); a search embeds the query with every working pass
and keeps each chunk's best similarity.

A pass is optional by nature: when its model cannot be used (Ollama does not have it, the server is
down at start, it gives vectors of another dimension) the pass is skipped with a warning in the log
and a line in status ``degraded`` that says what to do, and the primary carries on alone. A pass
that fails later (the model removed while running) is skipped from then on, likewise; a restart
tries it again.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from ragweedd.embed.factory import make_embedder
from ragweedd.errors import ConfigError, RagweedError
from ragweedd.logging import get_logger

if TYPE_CHECKING:
    from ragweedd.config import Config
    from ragweedd.embed.base import Embedder

log = get_logger("ragweedd.embed")

# space name -> (config key, the dimension its vectors must have)
PASS_KEYS: dict[str, tuple[str, int]] = {"384": ("multi_embed_384", 384), "1024": ("multi_embed_1024", 1024)}


@dataclass
class Pass:
    space: str  # "384" or "1024": the name of its vector space and the suffix of its index files
    key: str  # the config key that asked for it
    spec: str  # the model as configured
    dim: int  # the dimension the space requires
    embedder: Embedder | None = None  # None when skipped
    index_id: str = ""  # what its vectors are recorded as made by (model and input format)
    problem: str | None = None  # why it is skipped, with what to do
    vectors: dict[str, int] = field(default_factory=dict)  # collection -> stored vectors of this pass
    missing: dict[str, int] = field(default_factory=dict)  # collection -> chunks still without one

    @property
    def ok(self) -> bool:
        return self.embedder is not None and self.problem is None

    def info(self) -> dict[str, Any]:
        """The status entry of this pass (``contract.EmbedPass``)."""
        return {"key": self.key, "model": self.spec, "space": self.space, "dim": self.dim,
                "embedder_id": self.index_id or None, "state": "ok" if self.ok else "skipped",
                "vectors": sum(list(self.vectors.values())), "pending_chunks": sum(list(self.missing.values())),
                "problem": self.problem}


class Passes:
    """The configured passes of one process; thread-safe (the embedding stage marks a pass
    failed while searches read which passes work)."""

    def __init__(self, passes: list[Pass]) -> None:
        self._passes = passes
        self._lock = threading.Lock()

    @classmethod
    def none(cls) -> "Passes":
        return cls([])

    @classmethod
    def open(cls, cfg: Config, primary: Embedder, index_id: Callable[[str], str]) -> "Passes":
        """Make and probe the embedder of every configured pass (one small request each). Never
        raises: a pass that cannot be used is returned skipped, with its reason. ``index_id`` maps
        an embedder id to the id its vectors are recorded under (the model and the input format:
        ragweedd.ingest.vectorize.open_passes passes the one the primary uses)."""
        out = []
        for space, (key, dim) in PASS_KEYS.items():
            spec = (getattr(cfg, key, "") or "").strip()
            if not spec:
                continue
            p = Pass(space=space, key=key, spec=spec, dim=dim)
            try:
                emb = _probe(spec, cfg, key, dim, primary)
            except _Skip as e:
                p.problem = str(e)
                log.warning("embed_pass_skipped", key=key, model=spec, reason=p.problem)
            else:
                p.embedder = emb
                p.index_id = index_id(emb.id)
                log.info("embed_pass_ready", key=key, model=spec, dim=dim, embedder_id=p.index_id)
            out.append(p)
        return cls(out)

    def all(self) -> list[Pass]:
        with self._lock:
            return list(self._passes)

    def working(self) -> list[Pass]:
        with self._lock:
            return [p for p in self._passes if p.ok]

    def dims(self) -> dict[str, int]:
        """Space -> dimension of the working passes: the extra index files to keep."""
        return {p.space: p.dim for p in self.working()}

    def fail(self, p: Pass, error: str) -> None:
        """A pass whose embedder failed while running is skipped until the next start."""
        with self._lock:
            if p.problem is not None:
                return
            p.problem = (f"{p.key} = {p.spec!r} stopped working ({error}); the pass is skipped and searches use "
                         f"the other embedders; fix the model and restart ragweedd")
        log.warning("embed_pass_failed", key=p.key, model=p.spec, error=error)

    def degraded(self) -> list[str]:
        """Status lines of the passes that are skipped."""
        return [p.problem for p in self.all() if p.problem]

    def info(self) -> list[dict[str, Any]]:
        return [p.info() for p in self.all()]

    def close(self) -> None:
        """Release the pass models (the local one holds an inference session)."""
        for p in self.all():
            if p.embedder is not None:
                _close(p.embedder)


class _Skip(ConfigError):
    """An extra embedding pass the configuration names cannot run; ingest and search go on without it."""


def _probe(spec: str, cfg: Config, key: str, dim: int, primary: Embedder) -> Embedder:
    try:
        emb = make_embedder(spec, cfg, key=key)
        got = int(emb.dim)  # an Ollama model answers its first request here
        eid = emb.id
    except RagweedError as e:
        # the embedders' hints speak of the primary's key
        hint = f" ({e.hint.replace('embed.model', key)})" if e.hint else ""
        raise _Skip(f"{key} = {spec!r} is skipped: {e.message}{hint}; ingest and search go on without this pass "
                    f"until it is fixed and ragweedd restarted") from None
    except Exception as e:  # noqa: BLE001 - an optional pass never stops the daemon
        raise _Skip(f"{key} = {spec!r} is skipped: {type(e).__name__}: {e}; ingest and search go on without this "
                    f"pass until it is fixed and ragweedd restarted") from None
    if got != dim:
        _close(emb)
        raise _Skip(f"{key} = {spec!r} is skipped: that model gives {got}-d vectors and {key} needs a {dim}-d "
                    f"model; name a {dim}-d model (e.g. "
                    f"{'ollama:all-minilm' if dim == 384 else 'ollama:mxbai-embed-large'}) or clear the key")
    if eid == getattr(primary, "id", None):
        _close(emb)
        raise _Skip(f"{key} = {spec!r} is skipped: it is the primary embedder (embed.model), so the pass would "
                    f"add nothing; name another {dim}-d model or clear the key")
    return emb


def _close(emb: Embedder) -> None:
    close = getattr(emb, "close", None)
    if close is not None:
        close()
