"""Every exception ragweedd defines is in the one tree of ragweedd/errors.py, and the tree drawn in
that module's docstring is the real one.

An exception outside the tree escapes ``except RagweedError`` (the CLI's exit codes, the API's
error envelope, the MCP tools' wording) and carries no message/hint split; a drawing that lies
sends a newcomer to the wrong class."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import ragweedd
from ragweedd import errors
from ragweedd.errors import RagweedError

PKG = Path(ragweedd.__file__).resolve().parent
BUILTIN_EXCEPTIONS = {n for n, v in vars(builtins).items() if inspect.isclass(v) and issubclass(v, BaseException)}



def module_exceptions() -> dict[str, type]:
    """Every exception class defined at the top level of a module of the package, by qualified name."""
    found = {}
    for info in pkgutil.walk_packages([str(PKG)], "ragweedd."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == info.name:
                found[f"{info.name}.{name}"] = obj
    return found


def nested_exceptions(pkg: Path = PKG) -> list[str]:
    """Classes defined inside a function or class (the import walk does not see them) whose base is
    a builtin exception."""
    out = []
    for f in sorted(pkg.rglob("*.py")):
        tree = ast.parse(f.read_text(encoding="utf-8"))
        top = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and id(node) not in top:
                bases = {b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else ""
                         for b in node.bases}
                if bases & BUILTIN_EXCEPTIONS:
                    out.append(f"{f.relative_to(pkg.parent)}:{node.lineno} {node.name}")
    return out


def outside_the_tree(found: dict[str, type]) -> list[str]:
    return sorted(q for q, cls in found.items() if not issubclass(cls, RagweedError))


def drawn_tree(doc: str) -> dict[str, str | None]:
    """class name -> parent name, as the docstring's drawing shows them: a name's depth is its column."""
    parents: dict[str, str | None] = {}
    stack: list[str] = []
    for line in doc.splitlines():
        m = re.match(r"    ([│├└─ ]*)(\w+)", line)
        if m is None or (not stack and m.group(2) != "RagweedError"):
            if stack:
                break  # the drawing ended
            continue
        if m.group(1) and not m.group(1).endswith("── "):
            break
        depth = len(m.group(1)) // 4
        del stack[depth:]
        parents[m.group(2)] = stack[-1] if stack else None
        stack.append(m.group(2))
    return parents


def test_every_exception_of_the_package_is_in_the_tree():
    found = module_exceptions()
    assert len(found) > 40  # the walk reached the whole package
    assert outside_the_tree(found) == []
    assert nested_exceptions() == []


def test_the_drawing_is_the_tree():
    drawn = drawn_tree(errors.__doc__ or "")
    public = {cls.__name__: cls for q, cls in module_exceptions().items()
              if issubclass(cls, RagweedError) and not cls.__name__.startswith("_")}
    assert sorted(drawn) == sorted(public), "the drawing in ragweedd/errors.py names other classes than there are"
    wrong = {name: (drawn[name], cls.__bases__[0].__name__) for name, cls in public.items()
             if cls is not RagweedError and drawn[name] != cls.__bases__[0].__name__}
    assert wrong == {}, "drawn parent, real parent"


def test_the_checks_see_an_exception_outside_the_tree(tmp_path):
    class Stray(Exception):
        pass

    class Kept(errors.ConfigError):
        pass

    assert outside_the_tree({"x.Stray": Stray, "x.Kept": Kept}) == ["x.Stray"]
    pkg = tmp_path / "ragweedd"
    pkg.mkdir()
    (pkg / "m.py").write_text("def f():\n    class Hidden(ValueError):\n        pass\n    raise Hidden\n")
    assert nested_exceptions(pkg) == ["ragweedd/m.py:2 Hidden"]
    assert drawn_tree("    RagweedError\n    ├── A   x\n    │   └── B   y\n    └── C\n\nText\n") == {
        "RagweedError": None, "A": "RagweedError", "B": "A", "C": "RagweedError"}
