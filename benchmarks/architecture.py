"""The shape of the package in figures: how many files and lines, import cycles, arrows that run
against the data flow, modules outside ``store/`` that import a concrete storage backend, places
that construct a store or an index, imports inside functions, and mypy's coverage and errors.

Usage: python benchmarks/architecture.py [--no-mypy]

The layering below is the data flow of DESIGN §2 read as "who may import whom": a module may import
its own layer and the layers before it, never a later one. The stages of the flow are siblings that
meet only through the layers under them (the store, the contract) and the composition root above
them, so watch/ and ingest/ do not import each other; query and answer read what ingest wrote
through the store, not through ingest.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import table, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "ragweedd"

# (layer, prefixes): a module belongs to the first layer with a matching prefix
LAYERS: list[tuple[float, tuple[str, ...]]] = [
    (0, ("ragweedd.errors", "ragweedd.contract", "ragweedd.config", "ragweedd.paths", "ragweedd.logging",
         "ragweedd.checksums", "ragweedd.text_stats", "ragweedd.keyfile", "ragweedd.__init__")),
    (1, ("ragweedd.store",)),
    (1.5, ("ragweedd.supervise",)),  # keeps a stage's thread running; asks the store whether its server is away
    (2, ("ragweedd.index", "ragweedd.embed")),
    (3, ("ragweedd.extract",)),
    (4, ("ragweedd.chunk",)),  # reads what extraction gives
    (4, ("ragweedd.files",)),  # which files are indexed: read by watch/ and ingest/ alike
    (5, ("ragweedd.watch",)),
    (5, ("ragweedd.ingest",)),
    (5, ("ragweedd.jobs",)),
    (6, ("ragweedd.llm",)),
    (7, ("ragweedd.query",)),
    (8, ("ragweedd.answer",)),
    (9, ("ragweedd.status", "ragweedd.engine", "ragweedd.services", "ragweedd.ingest_line", "ragweedd.daemon_core")),
    (10, ("ragweedd.api", "ragweedd.web", "ragweedd.eval")),
    (11, ("ragweedd.cli", "ragweedd.daemon", "ragweedd.__main__")),
]
CONCRETE_STORE = re.compile(r"^ragweedd\.store\.(?!protocols$|types$|backends$|failures$|served_rot$|__init__$)")
STORE_CONSTRUCTORS = ("RagDB", "IngestDB", "JobQueue", "HistoryDB", "TreeDB", "IdfCacheDB", "DiskIndexes",
                      "SqliteBackend", "PgBackend", "open_backend", "open_data_dir", "open_store")
# the stages of the ingest and search lines: built by the composition root and nowhere else
STAGE_CONSTRUCTORS = ("Pipeline", "Vectorizer", "IndexSync", "Workers", "Collections", "Debouncer", "Searcher",
                      "ServerIndexes", "VectorSearch", "Core")
ROOTS = ("ragweedd.services", "ragweedd.ingest_line")


def module_name(p: Path) -> str:
    rel = p.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def room(mod: str) -> tuple[float, str]:
    for layer, prefixes in LAYERS:
        for pre in prefixes:
            if mod == pre or mod.startswith(pre + "."):
                return layer, prefixes[0]
    return 0, "ragweedd"


def resolve(mod: str, node: ast.ImportFrom, is_pkg: bool) -> str | None:
    if node.level == 0:
        return node.module
    base = mod.split(".")
    if not is_pkg:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(p: Path, mod: str, known: set[str]) -> list[tuple[str, bool, bool]]:
    """(target module, inside a function, under TYPE_CHECKING) for every internal import."""
    tree = ast.parse(p.read_text(), str(p))
    out: list[tuple[str, bool, bool]] = []

    def target(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    def visit(node: ast.AST, in_func: bool, typing_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            f = in_func or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            t = typing_only or (isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test))
            if isinstance(child, ast.Import):
                for a in child.names:
                    if a.name.startswith("ragweedd") and (m := target(a.name)):
                        out.append((m, f, t))
            elif isinstance(child, ast.ImportFrom):
                base = resolve(mod, child, p.name == "__init__.py")
                if base and base.startswith("ragweedd"):
                    for a in child.names:
                        m = target(f"{base}.{a.name}") or target(base)
                        if m:
                            out.append((m, f, t))
            visit(child, f, t)

    visit(tree, False, False)
    return out


def sccs(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            strong(v)
    return out


def measure(run_mypy: bool) -> dict:
    files = sorted(PKG.rglob("*.py"))
    mods = {module_name(p): p for p in files}
    known = set(mods)
    lines = sum(len(p.read_text().splitlines()) for p in files)
    graph: dict[str, set[str]] = defaultdict(set)
    arrows_up: set[tuple[str, str]] = set()
    siblings: set[tuple[str, str]] = set()
    concrete: set[str] = set()
    in_func = 0
    for mod, p in mods.items():
        for tgt, f, typing_only in imports(p, mod, known):
            if tgt == mod:
                continue
            in_func += f
            if not typing_only:
                graph[mod].add(tgt)
            (la, ra), (lb, rb) = room(mod), room(tgt)
            if lb > la:
                arrows_up.add((ra, rb))
            elif lb == la and ra != rb:
                siblings.add((ra, rb))
            if CONCRETE_STORE.match(tgt) and not mod.startswith("ragweedd.store"):
                concrete.add(mod)
    module_cycles = sccs(graph)
    pkg_graph: dict[str, set[str]] = defaultdict(set)
    for a, targets in graph.items():
        for b in targets:
            ra, rb = room(a)[1], room(b)[1]
            if ra != rb:
                pkg_graph[ra].add(rb)
    room_cycles = sccs(pkg_graph)
    builders: dict[str, int] = defaultdict(int)
    stage_builders: dict[str, int] = defaultdict(int)
    pat = re.compile(r"(?<![\w.])(" + "|".join(STORE_CONSTRUCTORS) + r")\(")
    stage_pat = re.compile(r"(?<![\w.])(" + "|".join(STAGE_CONSTRUCTORS) + r")\(")
    for mod, p in mods.items():
        if mod in ROOTS:
            continue
        code = "\n".join(line.split("#", 1)[0] for line in p.read_text().splitlines())
        if not mod.startswith("ragweedd.store"):
            builders[mod] += len(pat.findall(code))
        stage_builders[mod] += len(stage_pat.findall(code))
    builders = {k: v for k, v in builders.items() if v}
    stage_builders = {k: v for k, v in stage_builders.items() if v}
    out = {
        "files": len(files), "lines": lines,
        "module_cycles": len(module_cycles), "module_cycle_members": module_cycles,
        "room_cycles": len(room_cycles), "room_cycle_members": room_cycles,
        "arrows_against_flow": sorted(f"{a} -> {b}" for a, b in arrows_up),
        "sibling_stage_imports": sorted(f"{a} -> {b}" for a, b in siblings),
        "modules_importing_concrete_store": sorted(concrete),
        "store_construction_sites": dict(sorted(builders.items())),
        "stage_construction_sites": dict(sorted(stage_builders.items())),
        "imports_inside_functions": in_func,
    }
    if run_mypy:
        out.update(mypy_figures(files, lines))
    return out


def mypy_figures(files: list[Path], lines: int) -> dict:
    import tomllib

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    listed: set[Path] = set()
    for entry in cfg.get("files", []):
        q = ROOT / entry
        listed.update(q.rglob("*.py") if q.is_dir() else [q])
    covered = [p for p in files if p in listed]
    covered_lines = sum(len(p.read_text().splitlines()) for p in covered)
    r = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--check-untyped-defs",
                        "--python-version", "3.11", "ragweedd"], cwd=ROOT, capture_output=True, text=True)
    errs = [ln for ln in r.stdout.splitlines() if ": error:" in ln]
    return {"mypy_files_covered": len(covered), "mypy_lines_covered_share": covered_lines / lines,
            "mypy_errors_whole_package": len(errs),
            "mypy_files_with_errors": len({ln.split(":", 1)[0] for ln in errs})}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-mypy", action="store_true", help="skip the (slow) whole-package mypy run")
    ap.add_argument("--verbose", action="store_true", help="list the cycles, arrows and modules")
    args = ap.parse_args()
    m = measure(not args.no_mypy)
    rows = [{"figure": k, "value": (len(v) if isinstance(v, (list, dict)) else v)} for k, v in m.items()
            if not k.endswith("_members")]
    print(table(rows, ["figure", "value"]))
    if args.verbose:
        for k in ("module_cycle_members", "room_cycle_members", "arrows_against_flow", "sibling_stage_imports",
                  "modules_importing_concrete_store", "store_construction_sites", "stage_construction_sites"):
            print(f"\n{k}:")
            for item in m[k]:
                print("  ", item if not isinstance(m[k], dict) else f"{item}: {m[k][item]}")
    print(f"\nresults: {write_json('architecture', m)}")


if __name__ == "__main__":
    main()
