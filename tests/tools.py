"""External tools the tests need: skip when missing, fail instead when RAGWEED_REQUIRE_TOOLS=1 (CI)."""

from __future__ import annotations

import os
import shutil
import time

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


def wait_until(pred, timeout: float, interval: float = 0.1, what: str = "condition"):
    """Poll ``pred`` until it returns something truthy (which is returned); fail after ``timeout``
    seconds naming ``what`` and the last value."""
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        last = pred()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last value {last!r})")
