"""docs/api.md lists the top-level fields of the contract's response shapes; this keeps the list and
ragweedd/contract.py equal, and the OpenAPI document's schemas derived from the same types."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from ragweedd import contract
from ragweedd.api import openapi
from ragweedd.api.schemas import PUBLISHED

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def _documented() -> dict[str, list[str]]:
    text = DOC.read_text(encoding="utf-8")
    block = text[text.index("<!-- contract-fields:start -->"):text.index("<!-- contract-fields:end -->")]
    out = {}
    for m in re.finditer(r"^- `(\w+)`[^:]*: (.+)$", block, re.M):
        out[m.group(1)] = [f.strip() for f in m.group(2).split(",")]
    return out


def test_documented_fields_are_the_contract_fields():
    doc = _documented()
    assert set(doc) >= {"Status", "IngestProgress", "Collection", "Document", "Hit", "Source"}
    for name, fields in doc.items():
        tp = getattr(contract, name)
        assert fields == list(typing.get_type_hints(tp)), name


def test_every_published_shape_is_a_component_of_the_openapi_document():
    schemas = openapi.document()["components"]["schemas"]
    for tp in PUBLISHED:
        sch = schemas[tp.__name__]
        assert sch["additionalProperties"] is False
        assert set(sch["properties"]) == set(typing.get_type_hints(tp)), tp.__name__


def test_a_response_that_drifts_from_the_contract_fails_validation():
    """The check the contract tests rely on: a renamed field is refused."""
    from ragweedd.errors import RequestError

    ok = {"ok": True, "version": "1"}
    openapi.validate(ok, {"$ref": "#/components/schemas/Health"}, "health")
    try:
        openapi.validate({"ok": True, "versions": "1"}, {"$ref": "#/components/schemas/Health"}, "health")
    except RequestError as e:
        assert "version" in str(e)
    else:
        raise AssertionError("a renamed field passed validation")
