"""LLM providers (DESIGN §9): the ChatProvider protocol, adapters and ``make_provider``.

Importing this package is cheap: SDKs load only when a provider of theirs is built.
"""

from ragweedd.llm.base import ChatProvider, ChatResult, Chunk
from ragweedd.llm.factory import make_provider, parse_spec

__all__ = ["ChatProvider", "ChatResult", "Chunk", "make_provider", "parse_spec"]
