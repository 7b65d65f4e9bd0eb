"""kinflow's GROQ implementation: parser, closure compiler, evaluator and push-down.

Public API (other packages call exactly these)::

    tree = parse(query, params=None)
    value = evaluate(query_or_tree, dataset=..., params=..., root=..., now=..., resolve=...)
    names = free_parameters(tree)

Module map: lexer -> parser (validation included) -> nodes; compiler (closures) with
operators, functions, matching, values and scope; pushdown (Mongo prefilter, pure);
store (async query over a pymongo collection).
"""

from kinflow.groq.api import GroqInternalError, Tree, evaluate, free_parameters, parse
from kinflow.groq.errors import GroqError, GroqSyntaxError, GroqTypeError

__all__ = [
    "GroqError",
    "GroqInternalError",
    "GroqSyntaxError",
    "GroqTypeError",
    "Tree",
    "evaluate",
    "free_parameters",
    "parse",
]
