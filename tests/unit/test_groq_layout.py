"""The GROQ package's layout: a complete compiler table and modules of one job each.

The compiler is assembled from family modules that register themselves on import
(kinflow.groq.compiler imports them all); a node type nobody registers would only
fail when a query first uses it, so the table is checked against the node vocabulary.
"""

from __future__ import annotations

from pathlib import Path

from kinflow.groq import nodes as n
from kinflow.groq.compile_dispatch import COMPILERS
from kinflow.groq.compiler import FAMILIES

GROQ = Path(n.__file__).resolve().parent
MAX_LINES = 400  # no module over ~400 lines


def _node_types() -> set[type]:
    # The module's names, not Node.__subclasses__(): slots=True dataclasses replace the
    # class the decorator received, and the replaced one may still be listed there.
    return {v for v in vars(n).values()
            if isinstance(v, type) and issubclass(v, n.Node) and v is not n.Node}  # fmt: skip


def test_every_node_type_has_a_compiler() -> None:
    types = _node_types()
    assert len(types) > 30  # the whole vocabulary was found, not an empty set
    assert sorted(t.__name__ for t in types - COMPILERS.keys()) == []


def test_the_compiler_imports_every_family_module() -> None:
    on_disk = {f"kinflow.groq.{p.stem}" for p in GROQ.glob("compile_*.py")}
    assert {f.__name__ for f in FAMILIES} == on_disk - {"kinflow.groq.compile_dispatch"}


def test_no_groq_module_is_over_the_size_limit() -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in GROQ.glob("*.py")}
    assert {name: lines for name, lines in sizes.items() if lines > MAX_LINES} == {}
