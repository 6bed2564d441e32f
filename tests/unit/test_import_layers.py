"""Imports follow the layers drawn in docs/architecture.md: a package imports only from lower layers
(or, in the foundation, service and face layers, from its own layer). Lazy imports inside functions
count as well: they are dependencies all the same."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "ragweedd"
DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"

# rank, packages (top-level modules or subpackages of ragweedd), whether they may import each other
LAYERS: list[tuple[int, set[str], bool]] = [
    (0, {"__init__", "errors", "text_stats", "keyterms", "periods", "statements", "procs", "contract", "logging",
         "config", "paths", "checksums", "keyfile"}, True),
    (1, {"store"}, False),
    (2, {"extract", "llm", "embed", "supervise"}, False),
    (3, {"index", "chunk", "files"}, False),
    (4, {"watch", "query", "answer"}, False),
    (5, {"ingest", "jobs"}, False),
    (6, {"services", "ingest_line", "daemon_core", "status", "engine"}, True),
    (7, {"api", "cli", "daemon", "eval", "__main__"}, True),
]
RANK = {p: (r, shared) for r, pkgs, shared in LAYERS for p in pkgs}


def _unit(module: str) -> str:
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def _imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "ragweedd":
                out.extend((node.lineno, a.name if a.name != "__version__" else "__init__") for a in node.names)
            elif node.module.startswith("ragweedd."):
                out.append((node.lineno, _unit(node.module)))
        elif isinstance(node, ast.Import):
            out.extend((node.lineno, _unit(a.name)) for a in node.names if a.name.startswith("ragweedd."))
    return out


def violations(pkg: Path = PKG) -> list[str]:
    bad = []
    for f in sorted(pkg.rglob("*.py")):
        rel = f.relative_to(pkg)
        src = rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 or rel.name != "__init__.py" else "__init__"
        if src not in RANK:
            bad.append(f"{rel}: package '{src}' is in no layer of docs/architecture.md")
            continue
        r_src, shared = RANK[src]
        for line, tgt in _imports(f):
            if tgt == src:
                continue
            if tgt not in RANK:
                bad.append(f"{rel}:{line}: imports '{tgt}', which is in no layer")
                continue
            r_tgt, _ = RANK[tgt]
            if r_tgt > r_src or (r_tgt == r_src and not shared):
                bad.append(f"{rel}:{line}: '{src}' (layer {r_src}) imports '{tgt}' (layer {r_tgt})")
    return bad


def test_imports_follow_the_layers():
    assert violations() == []


def test_the_check_sees_an_import_against_the_layers(tmp_path):
    pkg = tmp_path / "ragweedd"
    (pkg / "store").mkdir(parents=True)
    (pkg / "store" / "x.py").write_text("def f():\n    from ragweedd.query.hybrid import Searcher\n")
    (pkg / "api").mkdir()
    (pkg / "api" / "y.py").write_text("from ragweedd.contract import Status\n")
    assert violations(pkg) == ["store/x.py:2: 'store' (layer 1) imports 'query' (layer 4)"]


def test_the_doc_draws_the_same_layers():
    text = DOC.read_text(encoding="utf-8")
    for rank, pkgs, _ in LAYERS:
        row = re.search(rf"^\| {rank} \|([^|]*)\|", text, re.M)
        assert row, f"docs/architecture.md has no row for layer {rank}"
        named = set(re.findall(r"`([a-z_]+)", row.group(1)))
        assert named == pkgs, (rank, named, pkgs)
