"""Embedders (DESIGN §6): the protocol in base, the factory in factory, long-text handling in long.

Importing this package is cheap; numpy and onnxruntime load when an embedder is made or used.
"""

from ragweedd.embed.factory import make_embedder

__all__ = ["make_embedder"]
