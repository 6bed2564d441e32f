"""Embeddings from a local Ollama server (``ollama:NAME``).

Uses the batched ``POST /api/embed`` ({"model", "input": [...]} -> {"embeddings": [[...], ...]}) and
falls back to the per-text ``POST /api/embeddings`` ({"model", "prompt"} -> {"embedding": [...]})
when a server older than 0.3 answers 404 without naming the model. The dimension is learnt from the
first answer, and every later answer must keep it. The id carries the model's digest from
``/api/tags`` so that re-pulling a changed model changes the id (and re-embeds).

Stdlib urllib only: one blocking request per batch, called from the ingest worker thread.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any, Sequence

from ragweedd.errors import EmbedderError

if TYPE_CHECKING:
    import numpy as np

# What each known model reads per text and the context we ask Ollama to give it (its default
# num_ctx is smaller than nomic's 8192 and would silently truncate long chunks).
_KNOWN_LIMITS = {
    "nomic-embed-text": 8192,
    "mxbai-embed-large": 512,
    "all-minilm": 256,
    "snowflake-arctic-embed": 512,
    "snowflake-arctic-embed2": 8192,
    "bge-m3": 8192,
    "bge-large": 512,
    "granite-embedding": 512,
}
_DEFAULT_LIMIT = 512
# Chunk size for chunk_size='auto' with Ollama models: the original RAGWeed default.
_PREFERRED_CHUNK_TOKENS = 2048


def _base_name(model: str) -> str:
    return model.split("/")[-1].split(":")[0].lower()


class OllamaEmbedder:
    preferred_chunk_tokens = _PREFERRED_CHUNK_TOKENS
    # not measured for Ollama models (none on the test machine): the local model's figure
    preferred_overlap_pct = 15
    preferred_overlap_pct_pdf = 50

    def __init__(self, model: str, base_url: str = "http://127.0.0.1:11434", *, timeout_s: float = 120.0) -> None:
        if not model or model != model.strip():
            raise EmbedderError(f"ollama embedder: model name {model!r} is empty or has spaces",
                                hint="use embed.model = 'ollama:NAME', e.g. 'ollama:nomic-embed-text'")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.max_input_tokens = _KNOWN_LIMITS.get(_base_name(model), _DEFAULT_LIMIT)
        self._num_ctx = _KNOWN_LIMITS.get(_base_name(model))
        self._dim: int | None = None
        self._id: str | None = None
        self._legacy = False  # server has only /api/embeddings
        self._lock = threading.Lock()

    # --- identity, learnt lazily from the server --------------------------------------------
    @property
    def id(self) -> str:
        if self._id is None:
            digest = self._digest()
            self._id = f"ollama:{self.model}@{digest[:12]}" if digest else f"ollama:{self.model}"
        return self._id

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.embed_batch(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def _digest(self) -> str | None:
        status, body = self._request("GET", "/api/tags", None)
        if status != 200 or not isinstance(body, dict):
            return None  # a proxy without /api/tags: identity by name only
        want = {self.model, self.model if ":" in self.model else self.model + ":latest"}
        for m in body.get("models") or []:
            if isinstance(m, dict) and (m.get("name") in want or m.get("model") in want):
                d = m.get("digest")
                return d.split(":")[-1] if isinstance(d, str) and d else None
        raise self._missing()

    # --- embedding -------------------------------------------------------------------------
    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise EmbedderError(f"ollama:{self.model}: text #{i} is {type(t).__name__}, not str")
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        rows = self._embed_legacy(texts) if self._legacy else self._embed_new(texts)
        if len(rows) != len(texts):
            raise EmbedderError(f"Ollama at {self.base_url} returned {len(rows)} embeddings for {len(texts)} texts "
                                f"(model {self.model})", hint="upgrade Ollama or check the model")
        arr = self._check_rows(rows)
        norms = np.linalg.norm(arr, axis=1, keepdims=True)
        if (norms == 0).any():
            raise EmbedderError(f"Ollama model {self.model} returned an all-zero embedding",
                                hint="the model is not an embedding model; use e.g. 'ollama:nomic-embed-text'")
        return (arr / norms).astype(np.float32)

    def _check_rows(self, rows: list) -> Any:
        import numpy as np

        try:
            arr = np.asarray(rows, dtype=np.float64)
        except (TypeError, ValueError):
            raise EmbedderError(f"Ollama at {self.base_url} returned embeddings of unequal length or non-numbers "
                                f"(model {self.model})") from None
        if arr.ndim != 2 or arr.shape[1] == 0 or not np.isfinite(arr).all():
            raise EmbedderError(f"Ollama at {self.base_url} returned malformed embeddings of shape {arr.shape} "
                                f"(model {self.model})", hint="the model is probably not an embedding model")
        with self._lock:
            if self._dim is None:
                self._dim = int(arr.shape[1])
            elif arr.shape[1] != self._dim:
                raise EmbedderError(
                    f"Ollama model {self.model} at {self.base_url} now returns {arr.shape[1]}-d vectors, "
                    f"earlier {self._dim}-d",
                    hint="the model changed under the same name; restart ragweedd to re-embed")
        return arr

    def _options(self) -> dict:
        return {"num_ctx": self._num_ctx} if self._num_ctx else {}

    def _embed_new(self, texts: list[str]) -> list:
        payload: dict[str, Any] = {"model": self.model, "input": texts, "truncate": True}
        if self._num_ctx:
            payload["options"] = self._options()
        status, body = self._request("POST", "/api/embed", payload)
        if status == 404 and not self._names_model(body):
            self._legacy = True
            return self._embed_legacy(texts)
        self._raise_for(status, body, "/api/embed")
        emb = body.get("embeddings") if isinstance(body, dict) else None
        if not isinstance(emb, list):
            raise EmbedderError(f"Ollama at {self.base_url}/api/embed answered without 'embeddings' "
                                f"(model {self.model})",
                                hint="upgrade Ollama (0.3 or later)")
        return emb

    def _embed_legacy(self, texts: list[str]) -> list:
        rows = []
        for t in texts:
            payload: dict[str, Any] = {"model": self.model, "prompt": t}
            if self._num_ctx:
                payload["options"] = self._options()
            status, body = self._request("POST", "/api/embeddings", payload)
            self._raise_for(status, body, "/api/embeddings")
            emb = body.get("embedding") if isinstance(body, dict) else None
            if not isinstance(emb, list):
                raise EmbedderError(f"Ollama at {self.base_url}/api/embeddings answered without 'embedding' "
                                    f"(model {self.model})")
            rows.append(emb)
        return rows

    # --- HTTP ------------------------------------------------------------------------------
    def _names_model(self, body: Any) -> bool:
        err = body.get("error") if isinstance(body, dict) else None
        return isinstance(err, str) and "not found" in err.lower() and "model" in err.lower()

    def _missing(self) -> EmbedderError:
        return EmbedderError(f"Ollama at {self.base_url} does not have the model {self.model!r}",
                             hint=f"run `ollama pull {self.model}`, or change embed.model")

    def _raise_for(self, status: int, body: Any, path: str) -> None:
        if status == 200:
            return
        if status == 404 and self._names_model(body):
            raise self._missing()
        err = body.get("error") if isinstance(body, dict) else body
        raise EmbedderError(f"Ollama at {self.base_url}{path} answered HTTP {status} for model {self.model}: "
                            f"{str(err)[:300]}", hint="check `ollama ps` and the server log")

    def _request(self, method: str, path: str, payload: Any) -> tuple[int, Any]:
        url = self.base_url + path
        data = None if payload is None else json.dumps(payload).encode("utf-8")
        req = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise EmbedderError(f"cannot reach Ollama at {url} for model {self.model}: {reason}",
                                hint="start it with `ollama serve`, or fix embed.ollama_url") from None
        try:
            body = json.loads(raw.decode("utf-8")) if raw else None
        except (UnicodeDecodeError, json.JSONDecodeError):
            if status == 200:
                raise EmbedderError(f"Ollama at {url} answered with something that is not JSON "
                                    f"(model {self.model})",
                                    hint="is embed.ollama_url really an Ollama server?") from None
            body = raw.decode("utf-8", "replace")[:300]
        return status, body

