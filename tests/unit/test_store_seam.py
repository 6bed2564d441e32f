"""The storage seam is the only door: outside ``store/`` the package imports the seam's own modules
(the protocols, the shared value types, the backend table, failure classes, served-rot), never a
backend's. Imports inside functions count as well."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ragweedd.errors import ConfigError
from ragweedd.paths import Paths
from ragweedd.store import backends

PKG = Path(__file__).resolve().parents[2] / "ragweedd"
DOOR = {"ragweedd.store.protocols", "ragweedd.store.types", "ragweedd.store.backends", "ragweedd.store.failures",
        "ragweedd.store.served_rot"}


def _store_imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "ragweedd.store":
                out.extend((node.lineno, f"ragweedd.store.{a.name}") for a in node.names)
            elif node.module.startswith("ragweedd.store."):
                out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names if a.name.startswith("ragweedd.store."))
    return out


def doors_broken(pkg: Path = PKG) -> list[str]:
    bad = []
    for f in sorted(pkg.rglob("*.py")):
        rel = f.relative_to(pkg)
        if rel.parts[0] == "store":
            continue
        bad += [f"{rel}:{line}: imports {mod}" for line, mod in _store_imports(f) if mod not in DOOR]
    return bad


def test_no_module_outside_store_imports_a_backend():
    assert doors_broken() == []


def test_the_check_sees_a_backend_import_inside_a_function(tmp_path):
    (tmp_path / "ingest").mkdir()
    (tmp_path / "ingest" / "x.py").write_text(
        "from ragweedd.store.types import PRIMARY\n"
        "def f():\n    from ragweedd.store.sqlite.rag_db import RagDB\n"
        "def g():\n    from ragweedd.store import postgres\n")
    assert doors_broken(tmp_path) == ["ingest/x.py:3: imports ragweedd.store.sqlite.rag_db",
                                      "ingest/x.py:5: imports ragweedd.store.postgres"]


def test_every_backend_lives_in_a_subpackage_of_its_own_and_imports_no_other():
    top = sorted(p.name for p in (PKG / "store").glob("*.py"))
    assert top == ["__init__.py", "backends.py", "failures.py", "pathnames.py", "protocols.py", "rows.py",
                   "served_rot.py", "types.py"]
    assert {p.name for p in (PKG / "store").iterdir() if p.is_dir() and p.name != "__pycache__"} == {
        "sqlite", "postgres"}
    # what both use is in the shared modules; only the copy from a data directory into a server
    # (``ragweedd migrate``) reads one backend to write the other
    crossing = [f"{f.name}:{line}" for f in sorted((PKG / "store" / "postgres").glob("*.py"))
                for line, mod in _store_imports(f) if mod.startswith("ragweedd.store.sqlite")]
    assert all(c.startswith("pg_copy.py:") for c in crossing), crossing
    assert not [f"{f.name}:{line}" for f in sorted((PKG / "store" / "sqlite").glob("*.py"))
                for line, mod in _store_imports(f) if mod.startswith("ragweedd.store.postgres")]


def test_the_backend_is_picked_by_the_scheme_of_the_store_setting(tmp_path):
    assert backends.kind_of("sqlite") is backends.SQLITE
    assert backends.kind_of("postgresql://u@h/db") is backends.POSTGRES
    assert backends.kind_of("postgres://u@h/db") is backends.POSTGRES
    with pytest.raises(ConfigError, match="'mysql' names no storage backend"):
        backends.kind_of("mysql://u:secret@h/db")
    paths = Paths(data=tmp_path / "d", state=tmp_path / "s", cache=tmp_path / "c")
    stores = backends.open_store("sqlite", paths)
    assert stores.shared is None and stores.where == str(paths.collections)


def test_a_collection_made_again_is_a_new_store_to_its_handles(tmp_path):
    import shutil

    paths = Paths(data=tmp_path / "d", state=tmp_path / "s", cache=tmp_path / "c").ensure()
    stores = backends.open_data_dir(paths)
    assert stores.rag_identity("c") is None
    stores.open_rag("c").close()
    first = stores.rag_identity("c")
    assert first is not None and stores.rag_identity("c") == first
    keep = paths.collection_dir("c").with_name("kept")
    shutil.move(paths.collection_dir("c"), keep)  # the old file stays, so its inode is not reused
    stores.open_rag("c").close()
    assert stores.rag_identity("c") not in (None, first)
