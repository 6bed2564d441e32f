"""The hashing embedder and the embedder factory."""

import subprocess
import sys

import numpy as np
import pytest

from ragweedd.config import load_config
from ragweedd.embed import make_embedder
from ragweedd.embed.base import Embedder
from ragweedd.embed.hashing import HashEmbedder
from ragweedd.errors import ConfigError, EmbedderError


def test_hash_rows_are_unit_float32_and_shaped():
    e = HashEmbedder(64)
    v = e.embed_batch(["alpha beta", "", "!!!", "x" * 5000])
    assert v.shape == (4, 64) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert isinstance(e, Embedder)


def test_hash_related_texts_are_closer_than_unrelated():
    e = HashEmbedder(256)
    a, b, c = e.embed_batch(["the cat sat on the mat", "a cat sat on a mat", "lattice quantum chromodynamics"])
    assert a @ b > 0.5
    assert a @ b > a @ c + 0.3
    # Word pieces count too: an inflected form stays near its stem.
    s, t, u = e.embed_batch(["embedding", "embeddings", "spreadsheet"])
    assert s @ t > s @ u + 0.3


def test_hash_is_deterministic_across_processes():
    code = ("from ragweedd.embed.hashing import HashEmbedder;"
            "print(HashEmbedder(32).embed_batch(['Grüße aus Köln, 42 cats'])[0].tolist())")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(outs) == 1
    here = HashEmbedder(32).embed_batch(["Grüße aus Köln, 42 cats"])[0]
    np.testing.assert_allclose(np.array(eval(outs.pop())), here, rtol=1e-6)


def test_hash_is_case_insensitive_and_id_names_dim_and_version():
    e = HashEmbedder(16)
    v = e.embed_batch(["Hello World", "hello world"])
    np.testing.assert_allclose(v[0], v[1])
    assert e.id == "hash:16@fh1" and e.dim == 16 and e.preferred_chunk_tokens == 256


@pytest.mark.parametrize("bad", [0, 1, -5, 70000, "64", 3.0, True])
def test_hash_bad_dimension(bad):
    with pytest.raises(ConfigError, match="embed.model"):
        HashEmbedder(bad)


def test_hash_rejects_non_text():
    with pytest.raises(EmbedderError, match="text #1 is NoneType"):
        HashEmbedder(8).embed_batch(["ok", None])


def test_factory_makes_each_kind_without_loading_models():
    cfg = load_config(env={}, text='[embed]\nthreads = 1\nbatch_size = 8\nollama_url = "http://127.0.0.1:9"\n')
    h = make_embedder("hash:64", cfg)
    assert h.dim == 64
    loc = make_embedder("local:all-minilm-l6-v2", cfg)
    # built from the int8 ONNX export: its id names that file, so collections embedded from the
    # float32 safetensors (@q8-53aa5117) are re-embedded rather than mixed
    assert loc.id == "local:all-minilm-l6-v2@q8-8199be6f" and loc.variant == "q8"
    assert (loc.dim, loc.max_input_tokens, loc.threads, loc.batch_size) == (384, 256, 1, 8)
    assert loc._session is None  # lazy: nothing loaded yet
    f32 = make_embedder("local:all-minilm-l6-v2-f32", cfg)
    assert f32.variant == "f32" and f32.id == "local:all-minilm-l6-v2@f32-53aa5117"
    i8 = make_embedder("local:all-minilm-l6-v2-int8", cfg)
    assert i8.variant == "int8" and i8.id == "local:all-minilm-l6-v2@int8-8199be6f" and i8.dim == 384
    ol = make_embedder("ollama:nomic-embed-text:v1.5", cfg)
    assert ol.model == "nomic-embed-text:v1.5" and ol.base_url == "http://127.0.0.1:9"
    assert ol.max_input_tokens == 8192 and ol.preferred_chunk_tokens == 2048
    assert make_embedder("ollama:mxbai-embed-large", cfg).max_input_tokens == 512


def test_factory_uses_default_config_when_none():
    assert make_embedder("LOCAL:All-MiniLM-L6-v2").threads == 2


@pytest.mark.parametrize("spec", ["", "minilm", "local:bert-base", "ollama:", "ollama:two words",
                                  "hash:", "hash:abc", "hash:1", "hash:999999", "openai:text-embedding-3", None])
def test_factory_unknown_spec_names_key_and_forms(spec):
    with pytest.raises(ConfigError) as ei:
        make_embedder(spec, load_config(env={}))
    assert "embed.model" in str(ei.value)
    assert ei.value.exit_code == 2


def test_factory_error_can_name_another_key():
    with pytest.raises(ConfigError, match="multi_embed_384"):
        make_embedder("nope", load_config(env={}), key="multi_embed_384")


def test_importing_factory_is_cheap():
    code = ("import sys, ragweedd.embed, ragweedd.embed.base, ragweedd.embed.factory, ragweedd.embed.long;"
            "print(sorted(m for m in ('numpy', 'onnxruntime', 'tokenizers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
