"""How close paraphrases and near-misses of a query embed with the default model: the measurement
behind search_cache_similarity = 0.97 (docs/retrieval.md, Semantic cache). Prints cosine, whether the
pair asks the same thing, and the pair.

    python benchmarks/search_cache_threshold.py
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ragweedd.config import default_config  # noqa: E402
from ragweedd.embed.factory import make_embedder  # noqa: E402
from ragweedd.embed.long import embed_texts  # noqa: E402
from ragweedd.query.semantic_cache import numbers_of  # noqa: E402

PAIRS = [
 ("what is the capital of france", "what's the capital of france", "same"),
 ("what is the capital of france", "What is the capital of France?", "same"),
 ("how do mitochondria produce atp", "how do mitochondria make atp", "same"),
 ("how do mitochondria produce atp", "how does the mitochondrion produce ATP", "same"),
 ("revenue of apple in 2022", "apple revenue 2022", "same"),
 ("revenue of apple in 2022", "revenue of apple in 2023", "different"),
 ("revenue of apple in 2022", "net income of apple in 2022", "different"),
 ("side effects of aspirin", "side effects of ibuprofen", "different"),
 ("who wrote the contract", "who signed the contract", "different"),
 ("python list sort", "python list sorting", "same"),
 ("when was the meeting moved", "when was the meeting cancelled", "different"),
 ("heart attack symptoms", "symptoms of a heart attack", "same"),
 ("capital of france", "capital of germany", "different"),
 ("termination clause of the lease", "termination clause in the lease", "same"),
 ("q3 2021 operating margin", "q3 2022 operating margin", "different"),
]


def main() -> None:
    cfg = default_config()
    emb = make_embedder(cfg.embed_model, cfg)
    a = embed_texts(emb, [p[0].lower() for p in PAIRS])
    b = embed_texts(emb, [p[1].lower() for p in PAIRS])
    print("cosine\tasks\tnumbers differ\tpair")
    for (x, y, kind), u, v in zip(PAIRS, a, b):
        print(f"{float(np.dot(u, v)):.4f}\t{kind}\t{numbers_of(x) != numbers_of(y)}\t{x!r} / {y!r}")


if __name__ == "__main__":
    main()
