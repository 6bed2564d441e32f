"""The lines are built in one place (docs/architecture.md): stores, indexes and the stages of the
ingest and search lines are constructed only by the composition root (``services.py``,
``ingest_line.py``) and, for the stores, by the storage backends themselves. Everything else is
handed what it uses, so a newcomer finds every wiring decision in those two files."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "ragweedd"
ROOTS = {"services.py", "ingest_line.py"}
STORES = {"RagDB", "IngestDB", "JobQueue", "HistoryDB", "TreeDB", "IdfCacheDB", "SqliteBackend", "PgBackend",
          "open_backend", "open_data_dir", "open_store", "DiskIndexes"}
STAGES = {"Pipeline", "Vectorizer", "IndexSync", "Workers", "Collections", "Debouncer", "Searcher",
          "ServerIndexes", "VectorSearch", "Core"}


def constructions(pkg: Path = PKG) -> list[str]:
    bad = []
    for f in sorted(pkg.rglob("*.py")):
        rel = f.relative_to(pkg).as_posix()
        if rel in ROOTS:
            continue
        names = STAGES | (set() if rel.startswith("store/") else STORES)
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names:
                bad.append(f"{rel}:{node.lineno}: builds {node.func.id}")
    return bad


def test_only_the_composition_root_builds_stores_and_stages():
    assert constructions() == []


def test_the_check_sees_a_leaf_that_builds_its_own_store(tmp_path):
    pkg = tmp_path / "ragweedd"
    (pkg / "query").mkdir(parents=True)
    (pkg / "query" / "x.py").write_text("def f(cfg, paths):\n    return DiskIndexes(cfg, paths)\n")
    (pkg / "store").mkdir()
    (pkg / "store" / "y.py").write_text("def g(p):\n    return RagDB(p)\n")  # a backend opens its own
    (pkg / "services.py").write_text("def h(cfg, paths):\n    return Pipeline(cfg, paths)\n")
    assert constructions(pkg) == ["query/x.py:2: builds DiskIndexes"]
