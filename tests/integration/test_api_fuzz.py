"""Fuzz every operation of the API from its own OpenAPI document (schemathesis), against a real
FakeEngine-backed server with the token: no 5xx, errors in the envelope, the server stays up.
Bounded to FUZZ_EXAMPLES cases per operation so the whole file runs in well under a minute."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import (  # noqa: E402
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from fake_engine import FakeEngine  # noqa: E402
from ragweedd.api.openapi import document  # noqa: E402
from tests.api_support import running_api  # noqa: E402

FUZZ_EXAMPLES = int(os.environ.get("RAGWEED_FUZZ_EXAMPLES", "15"))

schema = schemathesis.openapi.from_dict(document())


@pytest.fixture(scope="module")
def fuzz_api(tmp_path_factory):
    with running_api(tmp_path_factory.mktemp("fuzz"), FakeEngine(), max_body_bytes=256 * 1024) as a:
        yield a
        # after everything the fuzzer threw at it, the server still answers
        assert a.request("GET", "/v1/health", token=None)[0] == 200
        assert a.request("GET", "/v1/status")[0] == 200


@schema.parametrize()
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=True)
def test_fuzz_operation(case, fuzz_api):
    resp = case.call(base_url=f"http://127.0.0.1:{fuzz_api.port}",
                     headers={"Authorization": f"Bearer {fuzz_api.token}"}, timeout=15)
    case.validate_response(resp, checks=[not_a_server_error, status_code_conformance, content_type_conformance,
                                         response_schema_conformance])
    assert resp.status_code < 500, resp.text[:500]
    if resp.status_code >= 400:
        body = resp.json()
        assert set(body) == {"error"} and body["error"]["code"] and body["error"]["message"]
