"""Compiles a syntax tree into nested Python closures, one per node.

Owns evaluation semantics, spread over one module per family of nodes: leaves and
constructors (``compile_literals``), traversals (``compile_traversals``), operators and
three-valued logic (``compile_operators``), calls and the ``order()``/``score()`` pipes
(``compile_calls``), with node-type dispatch and memoising in ``compile_dispatch``.
Compiling once and calling closures avoids a dispatch on node type per element, which
is what makes conditions cheap in hot loops over thousands of rows. This module puts
the families together: import :func:`compile_node` from here.
"""

from __future__ import annotations

from kinflow.groq import (
    compile_calls,
    compile_literals,
    compile_operators,
    compile_traversals,
)
from kinflow.groq import nodes as n
from kinflow.groq.compile_dispatch import COMPILERS, compile_node
from kinflow.groq.scope import Compiled

__all__ = ["FAMILIES", "compile_node"]

# Importing a family registers its compilers; these are the families the table is made of.
FAMILIES = (compile_literals, compile_traversals, compile_operators, compile_calls)


def _context_only(node: n.Node) -> Compiled:
    raise AssertionError(f"{type(node).__name__} must not survive validation")


for _cls in (n.Range, n.Pair, n.Asc, n.Desc):
    COMPILERS[_cls] = _context_only
