"""Hostile inputs to the API (issue 12, items 13-15), against the REAL engine: each was a 500, an
accepted bad name or a disagreement between the OpenAPI document and the server."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest

from ragweedd.api import openapi  # noqa: E402
from ragweedd.config import load_config  # noqa: E402
from ragweedd.errors import ConfigError, RequestError  # noqa: E402
from tests.api_support import running_api  # noqa: E402

JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    with running_api(tmp_path_factory.mktemp("hostile")) as a:
        yield a
        # nothing above broke the daemon
        assert a.ok("POST", "/v1/search", {"query": "hnsw graph"})["results"]


def refused(resp, status: int = 400) -> dict:
    st, _, body = resp
    assert st == status, (st, body)
    assert set(body) == {"error"} and body["error"]["message"], body
    return body["error"]


# --------------------------------------------------------------------------- item 13
@pytest.mark.parametrize("depth", [1000, 100_000])
@pytest.mark.parametrize("where", ["query", "collections", "top"])
def test_deeply_nested_json_is_a_400(api, depth, where):
    deep = "[" * depth + "]" * depth
    raw = {"query": '{"query": %s}' % deep, "collections": '{"query": "x", "collections": %s}' % deep,
           "top": deep}[where]
    e = refused(api.request("POST", "/v1/search", raw=raw.encode(), headers=JSON))
    assert "nest" in e["message"] or "must be" in e["message"], e


def test_validator_recursion_is_bounded():
    value: list = []
    for _ in range(20_000):
        value = [value]
    with pytest.raises(RequestError, match="nested more than"):
        openapi.validate(value, {}, "x")
    assert openapi.depth(value) > openapi.MAX_DEPTH


@pytest.mark.parametrize("field", ["query", "path_glob"])
def test_lone_surrogate_is_a_400(api, field):
    body = b'{"query": "x", "path_glob": "\\ud800"}' if field == "path_glob" else b'{"query": "a\\ud800b"}'
    e = refused(api.request("POST", "/v1/search", raw=body, headers=JSON))
    assert "surrogate" in e["message"], e
    refused(api.request("POST", "/v1/ask?stream=false", raw=body, headers=JSON))


def test_lone_surrogate_in_a_chat_message_is_a_400_and_nothing_is_kept(api):
    before = api.ok("GET", "/v1/history")["total"]
    body = b'{"model": "ragweedd/all", "messages": [{"role": "user", "content": "tea\\ud800?"}]}'
    e = refused(api.request("POST", "/v1/chat/completions", raw=body, headers=JSON))
    assert "surrogate" in e["message"], e
    assert api.ok("GET", "/v1/history")["total"] == before


@pytest.mark.parametrize("route", ["/v1/documents", "/v1/history"])
@pytest.mark.parametrize("param", ["limit", "offset"])
@pytest.mark.parametrize("digits", ["\uff11", "\u0661", "\u00b9"])  # fullwidth 1, Arabic-Indic 1, superscript 1
def test_query_numbers_are_ascii_digits_only(api, route, param, digits):
    e = refused(api.request("GET", f"{route}?{param}={quote(digits)}"))
    assert "whole number" in e["message"], e


def test_an_integral_float_is_an_integer(api):
    """JSON Schema counts 45.0 as an integer; encoders that write every number as a float send it."""
    res = api.ok("POST", "/v1/search", {"query": "hnsw graph", "top_k": 45.0})
    assert res["results"]
    refused(api.request("POST", "/v1/search", raw=b'{"query": "x", "top_k": 4.5}', headers=JSON))


@pytest.mark.parametrize("key", ["99999999999999999999999", "¹", "١", "١٢", "+1", " 1", "0x1"])
def test_odd_document_keys_are_404(api, key):
    refused(api.request("GET", "/v1/documents/" + quote(key, safe="")), 404)


@pytest.mark.parametrize("size", [242, 250, 255])
def test_upload_names_up_to_255_bytes(api, size):
    name = "n" * (size - 4) + ".txt"
    st, _, body = api.request("POST", f"/v1/collections/notes/documents?filename={name}", raw=b"long name words")
    assert st == 200, body
    assert Path(body["source_file"]).name == name and Path(body["source_file"]).read_bytes() == b"long name words"


def test_upload_name_over_255_bytes_is_a_400(api):
    refused(api.request("POST", f"/v1/collections/notes/documents?filename={'n' * 252}.txt", raw=b"x"))


# --------------------------------------------------------------------------- item 14
@pytest.mark.parametrize("name", ["x\n", "x\r", "x\n\n", "\nx"])
def test_collection_name_with_newline_refused_by_add(api, name):
    refused(api.request("POST", "/v1/collections", {"name": name, "paths": [str(api.docs_dir)]}))
    assert name not in {c["name"] for c in api.ok("GET", "/v1/collections")["items"]}


@pytest.mark.parametrize("method,suffix", [("POST", "/scan"), ("POST", "/reanalyze"), ("POST", "/rebuild-fts"),
                                           ("DELETE", ""), ("POST", "/documents?filename=a.txt")])
def test_collection_name_with_newline_refused_in_paths(api, method, suffix):
    refused(api.request(method, f"/v1/collections/notes%0A{suffix}", raw=b"x"))
    refused(api.request("GET", "/v1/documents?collection=notes%0A"))
    refused(api.request("POST", "/v1/search", {"query": "x", "collections": ["notes\n"]}))


def test_collection_name_with_newline_refused_by_config(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[collections."x\\n"]\npaths = ["{tmp_path}"]\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="not allowed"):
        load_config(cfg, env={})


# --------------------------------------------------------------------------- item 15: document == server
def _schema_refuses(sch: dict, value) -> bool:
    try:
        openapi.validate(value, sch, "x")
    except RequestError:
        return True
    return False


def test_doc_id_filter_schema_and_server_agree(api):
    sch = openapi.schema("SearchRequest")
    assert _schema_refuses(sch, {"query": "x", "doc_id": "0"})
    refused(api.request("POST", "/v1/search", {"query": "x", "doc_id": "0"}))
    md5 = "0" * 32
    assert not _schema_refuses(sch, {"query": "x", "doc_id": md5})
    assert api.ok("POST", "/v1/search", {"query": "hnsw", "doc_id": md5})["results"] == []


def test_nul_is_refused_by_schema_and_server(api):
    sch = openapi.schema("SearchRequest")
    for field in ("query", "path_glob"):
        body = {"query": "x", field: "a\x00b"}
        assert _schema_refuses(sch, body)
        refused(api.request("POST", "/v1/search", body))
    glob = next(p for p in openapi.parameters("/v1/documents", "get") if p["name"] == "path_glob")
    assert _schema_refuses(glob["schema"], "a\x00")
    refused(api.request("GET", "/v1/documents?path_glob=a%00"))
    refused(api.request("GET", "/v1/documents/1%00"))


def test_upload_filename_schema_and_server_agree(api):
    """The document requires ?filename (a raw body has no other name), so no request it allows is
    refused for the lack of one; a multipart part's own filename is a leniency beyond it."""
    p = next(p for p in openapi.parameters("/v1/collections/{name}/documents", "post") if p["name"] == "filename")
    assert p["required"] is True
    e = refused(api.request("POST", "/v1/collections/notes/documents", raw=b"x",
                            headers={"Content-Type": "application/octet-stream"}))
    assert "filename" in e["message"] and e.get("hint")


# --------------------------------------------------------------------------- uploads that would never be indexed
@pytest.mark.parametrize("name,want", [("tool.exe", "'.exe'"), ("blob.xyz", "'.xyz'"),
                                       ("README-but-not", "no extension")])
def test_upload_of_a_type_no_extractor_reads_is_a_400(api, name, want):
    e = refused(api.request("POST", f"/v1/collections/notes/documents?filename={quote(name)}", raw=b"MZ binary"))
    assert want in e["message"] and "does not index" in e["message"], e
    assert "docs/formats.md" in e["hint"], e
    assert not [d for d in api.ok("GET", "/v1/documents?collection=notes&limit=500")["items"]
                if d["filename"] == name]


@pytest.mark.parametrize("name", ["\u202edm.exe", "\u202egpj.md", "a\u200bb.md", "\ufeffnotes.md"])
def test_upload_name_with_invisible_format_characters_is_a_400(api, name):
    e = refused(api.request("POST", f"/v1/collections/notes/documents?filename={quote(name)}", raw=b"words"))
    assert "invisible format characters" in e["message"] and "U+" in e["message"], e
    assert not [d for d in api.ok("GET", "/v1/documents?collection=notes&limit=500")["items"]
                if d["filename"] == name]


# --------------------------------------------------------------------------- collection roots
@pytest.mark.parametrize("root,what", [("/", "the filesystem root"), ("/proc", "/proc"), ("/sys/kernel", "/sys"),
                                       ("/dev", "/dev"), ("/tmp/../", "the filesystem root")])
def test_system_roots_are_refused_as_collection_folders(api, root, what):
    e = refused(api.request("POST", "/v1/collections", {"name": "everything", "paths": [root]}))
    assert what in e["message"] and "cannot be a collection's folder" in e["message"], e
    assert "everything" not in {c["name"] for c in api.ok("GET", "/v1/collections")["items"]}
