"""All SQL lives in ragweedd/store/ (DESIGN §14): no other module executes statements, imports
sqlite3 or holds a string that reads like SQL against a store table. That is what lets another
backend implement the store's named methods without touching query/, answer/ or api/."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "ragweedd"
STORE = PACKAGE / "store"

EXECUTE_CALLS = {"execute", "executemany", "executescript"}
SQL_WORD = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|PRAGMA|REPLACE)\b")


def store_tables() -> set[str]:
    """Every table the store's migrations create (plus the bookkeeping table of migrate())."""
    names = {"schema_migrations"}
    create = re.compile(r"CREATE\s+(?:VIRTUAL\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.I)
    for f in STORE.rglob("*.py"):  # every backend's subpackage
        names.update(create.findall(f.read_text(encoding="utf-8")))
    return names


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                out.add(id(body[0].value))
    return out


def sql_offences(source: str, tables: set[str]) -> list[tuple[int, str]]:
    """(line, what) for each use of SQL in ``source``. Docstrings are prose, so they may name SQL."""
    tree = ast.parse(source)
    table = re.compile(r"\b(" + "|".join(sorted(map(re.escape, tables))) + r")\b")
    docs = _docstrings(tree)
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in EXECUTE_CALLS:
            out.append((node.lineno, f".{node.func.attr}() call"))
        elif isinstance(node, ast.Import):
            out.extend((node.lineno, "imports sqlite3") for a in node.names if a.name.split(".")[0] == "sqlite3")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sqlite3":
            out.append((node.lineno, "imports from sqlite3"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if SQL_WORD.search(node.value) and table.search(node.value):
                out.append((node.lineno, f"SQL string {node.value[:70]!r}"))
    return sorted(out)


def test_the_detector_flags_sql():
    snippet = '''
import sqlite3
from sqlite3 import Row

def f(db, name):
    """Docstrings may say SELECT id FROM embeddings."""
    db.conn.execute("SELECT id FROM embeddings WHERE md5=?", (name,))
    db.conn.executemany("x", [])
    q = f"DELETE FROM jobs WHERE collection={name}"
    ok = "select the best jobs"  # lower-case prose is not SQL
    return "UPDATE history SET body_json=?"
'''
    found = sql_offences(snippet, store_tables())
    assert sorted({line for line, _ in found}) == [2, 3, 7, 8, 9, 11], found


def test_the_store_declares_the_tables_this_test_knows():
    assert {"ingest_files", "jobs", "embeddings", "fts_chunks", "changes", "history", "daemon_collections",
            "embed_cache", "fts_idf_cache", "schema_migrations"} <= store_tables()


def test_sql_lives_only_in_store():
    tables = store_tables()
    found = []
    for f in sorted(PACKAGE.rglob("*.py")):
        if STORE in f.parents:
            continue
        for line, what in sql_offences(f.read_text(encoding="utf-8"), tables):
            found.append(f"{f.relative_to(PACKAGE.parent)}:{line}: {what}")
    assert not found, "SQL outside ragweedd/store/ (move it behind a named store method):\n" + "\n".join(found)
