"""embed_texts: splitting of long inputs, batching, averaging, normalisation."""

import numpy as np
import pytest

from ragweedd.embed.hashing import HashEmbedder
from ragweedd.embed.long import OVERLAP_CHARS, embed_texts, split_for_embedder
from ragweedd.errors import EmbedderError

WORDS = ("river stone maple copper lantern orbit velvet harbor quartz meadow signal falcon "
         "ember tundra cobalt willow prism canyon").split()


def prose(n_words: int, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    return " ".join(WORDS[i] for i in rng.integers(0, len(WORDS), n_words))


class CountingEmbedder:
    """Hash vectors underneath; records every call and refuses texts over its limit."""

    def __init__(self, limit: int = 50, dim: int = 32, count_tokens: bool = False):
        self.inner = HashEmbedder(dim)
        self.id, self.dim, self.max_input_tokens = "fake:1", dim, limit
        self.calls: list[list[str]] = []
        if count_tokens:  # one token per whitespace word, as a tokenizer-backed embedder would count
            self.count_tokens = lambda s: len(s.split())

    def embed_batch(self, texts):
        self.calls.append(list(texts))
        for t in texts:
            n = self.count_tokens(t) if hasattr(self, "count_tokens") else -(-len(t) // 4)
            assert n <= self.max_input_tokens, f"over the limit: {n}"
        return self.inner.embed_batch(texts)


def test_short_texts_pass_through_in_batches():
    fake = CountingEmbedder(limit=100)
    texts = [f"text number {i}" for i in range(10)]
    out = embed_texts(fake, texts, batch_size=4)
    assert [len(c) for c in fake.calls] == [4, 4, 2]
    np.testing.assert_allclose(out, fake.inner.embed_batch(texts), atol=1e-6)


def test_long_text_is_split_with_overlap_and_averaged():
    fake = CountingEmbedder(limit=50)  # 50 tokens = 200 chars by the 4 chars/token rule
    text = prose(300)
    out = embed_texts(fake, [text], batch_size=3)
    parts = [p for call in fake.calls for p in call]
    assert len(parts) > 5 and all(len(p) <= 200 for p in parts)
    # Order restored: parts are sorted by length for batching, so rebuild from the splitter.
    ordered = split_for_embedder(text, 50, lambda s: -(-len(s) // 4))
    assert sorted(ordered) == sorted(parts)
    assert ordered[0] == text[:len(ordered[0])] and text.endswith(ordered[-1])
    for a, b in zip(ordered, ordered[1:]):
        # Parts overlap (the window is 200 chars, so overlap is capped at half a part) and start at words.
        assert a[-20:].strip() in text and b.split()[0] in a.split()[-30:]
        assert text.index(b) < text.index(a) + len(a)
    # Every word of the text is covered.
    assert set(text.split()) <= set(" ".join(parts).split())
    mean = fake.inner.embed_batch(ordered).mean(axis=0)
    np.testing.assert_allclose(out[0], mean / np.linalg.norm(mean), atol=1e-5)
    assert abs(np.linalg.norm(out[0]) - 1) < 1e-5


def test_overlap_is_200_chars_when_parts_are_long():
    text = prose(3000, seed=1)
    parts = split_for_embedder(text, 256, lambda s: -(-len(s) // 4))
    assert all(len(p) <= 1024 for p in parts)
    for a, b in zip(parts, parts[1:]):
        start_b = text.index(b[:60])
        end_a = text.index(a[-60:]) + 60
        assert OVERLAP_CHARS - 20 <= end_a - start_b <= OVERLAP_CHARS + 20


def test_uses_count_tokens_when_offered():
    fake = CountingEmbedder(limit=40, count_tokens=True)
    text = prose(200, seed=2)  # 200 "tokens" by the fake's count, ~1300 chars
    embed_texts(fake, [text])
    parts = [p for call in fake.calls for p in call]
    assert all(len(p.split()) <= 40 for p in parts)
    assert len(parts) >= 5
    # By 4 chars/token the parts would have been ~160 chars; the word count lets them be longer.
    assert max(len(p) for p in parts) > 200


def test_text_without_whitespace_is_cut_hard():
    parts = split_for_embedder("x" * 1000, 50, lambda s: -(-len(s) // 4))
    assert all(len(p) <= 200 for p in parts) and len(parts) >= 5
    assert "".join(parts).count("x") >= 1000


def test_mixed_lengths_keep_input_order():
    fake = CountingEmbedder(limit=50)
    texts = [prose(200, seed=3), "short one", prose(120, seed=4), ""]
    out = embed_texts(fake, texts, batch_size=2)
    assert out.shape == (4, 32) and out.dtype == np.float32
    np.testing.assert_allclose(out[1], fake.inner.embed_batch(["short one"])[0], atol=1e-6)
    np.testing.assert_allclose(out[3], fake.inner.embed_batch([""])[0], atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert all(len(c) <= 2 for c in fake.calls)


def test_empty_input():
    fake = CountingEmbedder()
    out = embed_texts(fake, [])
    assert out.shape == (0, 32) and fake.calls == []


@pytest.mark.parametrize("bs", [0, -1, 2.5, "8", True])
def test_bad_batch_size(bs):
    with pytest.raises(EmbedderError, match="batch_size"):
        embed_texts(CountingEmbedder(), ["a"], batch_size=bs)


def test_non_text_input():
    with pytest.raises(EmbedderError, match="text #1 is bytes"):
        embed_texts(CountingEmbedder(), ["a", b"b"])


class BrokenEmbedder(CountingEmbedder):
    def __init__(self, result):
        super().__init__()
        self.result = result

    def embed_batch(self, texts):
        return self.result(len(texts))


@pytest.mark.parametrize("result,match", [
    (lambda n: np.ones((n, 31), np.float32), "shape"),
    (lambda n: np.ones((n + 1, 32), np.float32), "shape"),
    (lambda n: np.ones(32, np.float32), "shape"),
    (lambda n: np.full((n, 32), np.nan, np.float32), "NaN"),
])
def test_wrong_embedder_output_is_an_error(result, match):
    with pytest.raises(EmbedderError, match=match):
        embed_texts(BrokenEmbedder(result), ["a", "b"])


def test_opposite_parts_fall_back_to_first_part():
    class Opposed(CountingEmbedder):
        def embed_batch(self, texts):
            self.calls.append(list(texts))
            out = np.zeros((len(texts), self.dim), np.float32)
            for i, t in enumerate(texts):
                out[i, 0] = 1.0 if t.count("aaa") > t.count("bbb") else -1.0
            return out

    fake = Opposed(limit=50)
    text = "aaa " * 30 + "bbb " * 32
    assert len(split_for_embedder(text, 50, lambda s: -(-len(s) // 4))) == 2
    out = embed_texts(fake, [text])
    assert out[0, 0] == pytest.approx(1.0)
