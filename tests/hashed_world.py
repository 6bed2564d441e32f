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
from ragweedd.store.backends import open_data_dir
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
    pipe = Pipeline(cfg, paths, emb, stores=open_data_dir(paths))
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


ENV = {"ANTHROPIC_API_KEY": API_KEY, "OPENAI_API_KEY": API_KEY, "GEMINI_API_KEY": API_KEY}


def provider_for(server: Any, name: str, model: str = "test-model", cfg: Any = None) -> Any:
    """The ragweedd provider ``name`` (its official SDK) pointed at ``server``, no retries."""
    from ragweedd.llm import make_provider

    url = server.url + "/v1" if name == "openai" else server.url
    return make_provider(f"{name}:{model}", cfg, env=ENV, base_url=url, timeout_s=10, max_retries=0,
                         retry_backoff_s=0.01)


def llm_server_fixtures(reply: Callable) -> tuple[Any, Any]:
    """A module's ``server`` (the wire-protocol LLM server answering with ``reply``) and an autouse
    fixture that clears its script and request log before each test: ``server, _clean = ...``."""
    import pytest

    from tests.fakes.llm_server import FakeLLMServer

    @pytest.fixture(scope="module")
    def server():
        with FakeLLMServer(models=("test-model",), reply=reply) as srv:
            yield srv

    @pytest.fixture(autouse=True)
    def _clean(server):
        server.script.clear()
        server.requests.clear()
        yield

    return server, _clean
