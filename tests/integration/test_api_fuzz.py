"""Fuzz every operation of the API from its own OpenAPI document (schemathesis) against the REAL
engine (DaemonEngine over a daemon core: hash embedder, real SQLite, ingest threads, watcher) with
the token: no 5xx, every response conforms to its documented status code, content type and
response schema (the contract's closed objects, ApiError for errors), and the server stays up.
Bounded to FUZZ_EXAMPLES cases per operation so the whole file runs in well under a minute."""

from __future__ import annotations

import os

import pytest
import schemathesis  # noqa: E402  (a test dependency: missing it is a failure, not a skip)
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import (  # noqa: E402
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from ragweedd.api.openapi import document  # noqa: E402
from tests.api_support import running_api  # noqa: E402

FUZZ_EXAMPLES = int(os.environ.get("RAGWEED_FUZZ_EXAMPLES", "15"))

# The /v1 API: the web UI's HTML pages (tests/integration/test_web_security.py) and /mcp's JSON-RPC
# (the official SDK in tests/system/test_mcp.py) answer in formats of their own.
_API = {**document(), "paths": {p: ops for p, ops in document()["paths"].items() if p.startswith("/v1/")}}
schema = schemathesis.openapi.from_dict(_API)

@pytest.fixture(scope="module")
def fuzz_api(tmp_path_factory):
    with running_api(tmp_path_factory.mktemp("fuzz"), max_body_bytes=256 * 1024) as a:
        yield a
        # after everything the fuzzer threw at it, the server still answers and the daemon still works
        assert a.request("GET", "/v1/health", token=None)[0] == 200
        assert a.request("GET", "/v1/status")[0] == 200
        assert a.ok("POST", "/v1/search", {"query": "hnsw graph"})["results"]


def check(case, fuzz_api):
    resp = case.call(base_url=f"http://127.0.0.1:{fuzz_api.port}",
                     headers={"Authorization": f"Bearer {fuzz_api.token}"}, timeout=15)
    case.validate_response(resp, checks=[not_a_server_error, status_code_conformance, content_type_conformance,
                                         response_schema_conformance])
    assert resp.status_code < 500, resp.text[:500]
    if resp.status_code >= 400:
        body = resp.json()
        assert set(body) == {"error"} and body["error"]["code"] and body["error"]["message"]


FUZZ = settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@schema.parametrize()
@FUZZ
def test_fuzz_operation(case, fuzz_api):
    check(case, fuzz_api)


def test_fuzz_covers_every_operation():
    ids = {op["operationId"] for ops in _API["paths"].values() for op in ops.values()}
    assert len(ids) == 24 and len(document()["paths"]) - len(_API["paths"]) == 5
