"""External tools the tests need: skip when missing, fail instead when RAGWEED_REQUIRE_TOOLS=1 (CI)."""

from __future__ import annotations

import os
import shutil

import pytest


def require_tool(name: str) -> str:
    """Path of the executable ``name``; skips the test if it is missing, or fails it when
    RAGWEED_REQUIRE_TOOLS=1 says every tool must be present."""
    path = shutil.which(name)
    if path:
        return path
    msg = f"required tool {name!r} is not installed"
    if os.environ.get("RAGWEED_REQUIRE_TOOLS") == "1":
        pytest.fail(msg + " (RAGWEED_REQUIRE_TOOLS=1)")
    pytest.skip(msg)
