"""The import graph docs/engine.md#layers promises: no cycles, and a pure ``kinflow.core``.

Read from the source (AST), not from a running interpreter, so an import
inside a function (the way a cycle hides) is seen too. Two graphs: module
level imports only, and module level plus imports inside functions. The
core is also imported in a fresh interpreter, which must not load a lake
driver, asyncio or any shell layer; its source must not read the clock or
draw randomness (time and keys come in through the plan context).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "kinflow"
CORE = PACKAGE / "core"

# Modules the core may never load, in a fresh interpreter.
IMPURE_MODULES = ("pymongo", "bson", "motor", "asyncio", "httpx", "starlette", "strawberry",
                  "uvicorn", "urllib.request", "kinflow.storage", "kinflow.engine",
                  "kinflow.schema", "kinflow.cli", "kinflow.http", "kinflow.worker")  # fmt: skip
# Imports the core's source may not name: I/O, the clock, entropy.
IMPURE_IMPORTS = ("time", "secrets", "random", "uuid", "asyncio", "os", "socket", "threading",
                  "subprocess", "urllib", "http", "pymongo", "bson", "kinflow.storage",
                  "kinflow.engine", "kinflow.schema", "kinflow.cli", "kinflow.http",
                  "kinflow.settings")  # fmt: skip
CLOCK_CALLS = ("now", "utcnow", "today", "monotonic", "perf_counter", "token_hex", "urandom")

def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path) -> Iterator[tuple[str, bool]]:
    """(imported module, inside a function) for every import outside ``TYPE_CHECKING``."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]

    def walk(node: ast.AST, nested: bool) -> Iterator[tuple[str, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            inner = nested or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.Import):
                yield from ((alias.name, inner) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package[: len(package) - child.level + 1]
                                    + ([child.module] if child.module else []))  # fmt: skip
                for alias in child.names:
                    sub = f"{base}.{alias.name}"
                    yield (sub if sub in MODULES else base), inner
            yield from walk(child, inner)

    yield from walk(ast.parse(path.read_text(), str(path)), False)


def _graph(with_nested: bool) -> dict[str, set[str]]:
    return {
        name: {target for target, nested in _imports(name, path)
               if target in MODULES and target != name and (with_nested or not nested)}
        for name, path in MODULES.items()
    }  # fmt: skip


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_cycle_check_sees_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycle_at_module_level() -> None:
    assert _cycles(_graph(with_nested=False)) == []


def test_no_import_cycle_through_imports_inside_functions() -> None:
    assert _cycles(_graph(with_nested=True)) == []


def _core_modules() -> dict[str, Path]:
    if not CORE.is_dir():
        pytest.skip("kinflow/core does not exist")
    return {name: path for name, path in MODULES.items()
            if name == "kinflow.core" or name.startswith("kinflow.core.")}  # fmt: skip


def test_core_source_names_no_io_clock_or_entropy() -> None:
    problems = []
    for name, path in _core_modules().items():
        for target, _nested in _imports(name, path):
            if any(target == bad or target.startswith(bad + ".") for bad in IMPURE_IMPORTS):
                problems.append(f"{name} imports {target}")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in CLOCK_CALLS):  # fmt: skip
                problems.append(f"{name}:{node.lineno} calls .{node.func.attr}()")
    assert problems == []


def test_core_imports_alone_in_a_fresh_interpreter() -> None:
    names = sorted(_core_modules())
    probe = (
        "import importlib, json, sys\n"
        f"for name in {names!r}: importlib.import_module(name)\n"
        f"bad = {IMPURE_MODULES!r}\n"
        "print(json.dumps(sorted(m for m in sys.modules\n"
        "    if any(m == b or m.startswith(b + '.') for b in bad))))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
