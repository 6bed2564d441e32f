"""docs/api.md lists exactly the routes the app registers (method and path)."""

import re
from pathlib import Path

from ragweedd.api.app import build_app
from ragweedd.contract import Engine

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def test_route_table_in_docs_matches_registered_routes():
    # Registering routes calls no engine method: any object stands in for it here.
    app = build_app(Engine, token="t" * 32, port=8723)
    registered = set()
    for r in app.router.routes():
        info = r.resource.get_info() if r.resource is not None else {}
        path = info.get("path") or info.get("formatter")
        if r.method in ("HEAD", "OPTIONS", "*") or not path:
            continue
        registered.add((r.method, path))
    registered.add(("POST", "/mcp"))  # the daemon adds it (ragweedd/api/mcp_http.py), for every method
    documented = set(re.findall(r"^\| (GET|POST|PUT|PATCH|DELETE) \| `(/[^`]*)` \|", DOC.read_text(), re.M))
    assert registered, "no routes found: the test would pass vacuously"
    assert registered - documented == set(), "routes missing from docs/api.md"
    assert documented - registered == set(), "docs/api.md lists routes that do not exist"
