"""A small collection ingested through the real pipeline with the hash:64 embedder, for the tests
of what runs on top of retrieval (HyDE, rerank, tree mode, answer evaluation): a real data
directory, real SQLite and index files, and, when asked, the synthesis LLM on a local
wire-protocol server (tests/fakes/llm_server.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

from ragweedd.config import Config, load_config
from ragweedd.embed.hashing import HashEmbedder
from ragweedd.ingest.pipeline import Pipeline
from ragweedd.paths import Paths
from tests.fakes.llm_server import API_KEY


def llm_toml(server: Any, provider: str = "openai", model: str = "test-model") -> str:
    """An ``[llm]`` table whose synthesis model is ``server``'s, no retries."""
    return (f'[llm]\nsynthesis = "{provider}:{model}"\nopenai_base_url = "{server.url}/v1"\n'
            f'openai_api_key = "{API_KEY}"\nmax_retries = 0\ntimeout_s = 20\n')


def hashed_collection(tmp: Path, files: Mapping[str, str | Callable[[Path], Any]], *, top: str = "",
                      llm: Any = None, collection: str = "lab") -> tuple[Config, Paths, HashEmbedder]:
    """``files`` (name -> text, or a writer called with the path) written under ``tmp/src`` and
    each ingested into ``collection``; ``top`` adds top-level config lines."""
    text = (f'data_dir = "{tmp}/data"\nstate_dir = "{tmp}/state"\ncache_dir = "{tmp}/cache"\n'
            f"{top}\n[embed]\nmodel = 'hash:64'\n" + (llm_toml(llm) if llm is not None else ""))
    cfg = load_config(text=text, env={})
    paths = Paths.from_config(cfg).ensure()
    emb = HashEmbedder(64)
    pipe = Pipeline(cfg, paths, emb)
    root = tmp / "src"
    try:
        for name, body in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if callable(body):
                body(path)
            else:
                path.write_text(body)
            assert pipe.ingest_file(collection, path, root).status == "indexed", name
    finally:
        pipe.close()
    return cfg, paths, emb
