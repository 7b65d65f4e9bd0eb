"""kinflow's GROQ implementation: parser, closure compiler, evaluator and push-down.

Public API (other packages call exactly these)::

    tree = parse(query, params=None)
    value = evaluate(query_or_tree, dataset=..., params=..., root=..., now=..., resolve=...,
                     budget=Budget(max_scanned=..., timeout=..., clock=...))
    names = free_parameters(tree)

Module map: lexer -> parser (validation included; rules in parse_cursor, parse_literals,
parse_postfix, parse_chains, parse_grammar, parse_customs) -> nodes; compiler (closures;
dispatch in compile_dispatch, node families in compile_literals, compile_traversals,
compile_operators, compile_calls) with operators, functions, matching, values and scope;
pushdown (Mongo prefilter, pure); budget (bounds checked cooperatively); store (async
query over a pymongo collection, evaluated in a worker thread).
"""

from kinflow.groq.api import GroqInternalError, Tree, evaluate, free_parameters, parse
from kinflow.groq.budget import Budget
from kinflow.groq.errors import (
    GroqCancelled,
    GroqError,
    GroqLimitExceeded,
    GroqSyntaxError,
    GroqTypeError,
)

__all__ = [
    "Budget",
    "GroqCancelled",
    "GroqError",
    "GroqInternalError",
    "GroqLimitExceeded",
    "GroqSyntaxError",
    "GroqTypeError",
    "Tree",
    "evaluate",
    "free_parameters",
    "parse",
]
