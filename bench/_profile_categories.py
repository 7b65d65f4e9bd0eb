"""cProfile figures of one request path, grouped the way docs/performance.md reports them."""

from __future__ import annotations

import pstats

# (label, file fragment, function name): inclusive time of that function
INCLUSIVE: list[tuple[str, str, str]] = [
    ("request through the ASGI app (starlette, strawberry, resolvers)",
     "starlette/applications.py", "__call__"),
    ("GraphQL parse", "graphql/language/parser.py", "parse"),
    ("GraphQL validate", "graphql/validation/validate.py", "validate"),
    ("GraphQL execute (resolvers included)", "graphql/execution/execute.py", "execute"),
    ("fireAction resolver", "kinflow/schema/mutations.py", "fire_action"),
    ("engine verb (commit, cascade, propagation request)", "kinflow/engine/driving.py", "verb"),
    ("lake transaction (pymongo, commit included)", "kinflow/storage/database.py",
     "transaction"),
    ("planning (plan_fire_action)", "kinflow/core/verbs.py", "plan_fire_action"),
    ("instance parse", "kinflow/core/state.py", "parse_instance"),
    ("write (diff + update)", "kinflow/engine/transact.py", "write"),
    ("after the commit (cascade, propagation request)", "kinflow/engine/driving.py", "cascade"),
    ("response: instance to JSON", "kinflow/core/state.py", "to_json"),
]
# (label, file fragment): exclusive time of every function in those files
EXCLUSIVE: list[tuple[str, tuple[str, ...]]] = [
    ("pymongo + bson (exclusive)", ("pymongo/", "bson/")),
    ("pydantic (exclusive)", ("pydantic/", "pydantic_core")),
    ("graphql-core + strawberry (exclusive)", ("graphql/", "strawberry/")),
    ("starlette + httpx (exclusive)", ("starlette/", "httpx/", "httpcore/")),
    ("kinflow (exclusive)", ("kinflow/",)),
    ("asyncio (exclusive)", ("asyncio/",)),
]


def categorise(stats: pstats.Stats) -> list[tuple[str, float]]:
    """(label, seconds) for every category, inclusive ones first."""
    table = stats.stats  # type: ignore[attr-defined]
    rows: list[tuple[str, float]] = []
    for label, fragment, name in INCLUSIVE:
        seconds = sum(entry[3] for (path, _, func), entry in table.items()
                      if fragment in path and func.rsplit(".", 1)[-1] == name)
        rows.append((label, seconds))
    for label, fragments in EXCLUSIVE:
        seconds = sum(entry[2] for (path, _, _), entry in table.items()
                      if any(f in path for f in fragments))
        rows.append((label, seconds))
    return rows
