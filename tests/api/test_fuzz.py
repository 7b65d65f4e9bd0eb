"""Generated operations over the whole schema: never a 5xx, never an unshaped error.

Hypothesis walks the running schema (graphql-core's view of it) and builds
queries and mutations with random selections and arguments: well-typed
values drawn from pools that hit real data, and now and then a wrong-typed
one. Every response must be a GraphQL answer; every error raised while
executing must carry ``extensions.code`` (refusals keep the engine's code,
anything unexpected is masked as ``internal-error`` with an id).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from graphql import (
    GraphQLEnumType,
    GraphQLField,
    GraphQLInputObjectType,
    GraphQLInputType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    GraphQLSchema,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from kinflow.schema import build_schema
from tests.api.conftest import data, gql
from tests.api.test_mutations import KITCHEN, deploy, fire, start

pytestmark = pytest.mark.lake

SCHEMA: GraphQLSchema = build_schema()._schema
IDS = ["k-1", "k-2", "missing", "bad id!", "", "article-1", "lake:production:k-1"]
STRINGS = ["", "a", "w", "bump", "go", "kitchen", "n", "b", "x", "production", "active",
           '*[_type == "article"]', "*[", "count(*)", "ü∂ß", "'; drop", "title"]
DRAWN: Counter[str] = Counter()

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10) | st.sampled_from(STRINGS),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["_id", "_type", "title", "n", "p", "id"]), inner,
                      max_size=3),
    max_leaves=6,
)


def literal(value: Any) -> str:
    """A GraphQL literal for a JSON-like value (enum names arrive pre-marked)."""
    if isinstance(value, Enum):
        return value.name
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    return "{" + ", ".join(f"{k}: {literal(v)}" for k, v in value.items()) + "}"


class Enum:
    def __init__(self, name: str) -> None:
        self.name = name


def value_of(draw: st.DrawFn, kind: GraphQLInputType, depth: int = 0) -> Any:
    if isinstance(kind, GraphQLNonNull):
        return value_of(draw, kind.of_type, depth)
    if draw(st.integers(0, 30)) == 0:  # now and then a value of the wrong type
        return draw(st.sampled_from([None, 7, "x", True, [1], {"z": 1}]))
    if isinstance(kind, GraphQLList):
        return [value_of(draw, kind.of_type, depth + 1)
                for _ in range(draw(st.integers(0, 2 if depth < 2 else 0)))]  # fmt: skip
    if isinstance(kind, GraphQLEnumType):
        return Enum(draw(st.sampled_from(sorted(kind.values))))
    if isinstance(kind, GraphQLInputObjectType):
        names = sorted(kind.fields)
        chosen = draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names)))
        return {n: value_of(draw, kind.fields[n].type, depth + 1) for n in chosen}
    assert isinstance(kind, GraphQLScalarType)
    scalars = {
        "ID": st.sampled_from(IDS), "String": st.sampled_from(STRINGS),
        "Int": st.integers(-3, 2000), "Boolean": st.booleans(),
        "JSON": json_values, "DateTime": st.just("2026-01-01T00:00:00.000Z"),
        "Float": st.floats(-1, 1, allow_nan=False),
    }  # fmt: skip
    return draw(scalars[kind.name])


def unwrap(kind: Any) -> Any:
    while isinstance(kind, GraphQLNonNull | GraphQLList):
        kind = kind.of_type
    return kind


def selection(draw: st.DrawFn, kind: GraphQLObjectType, depth: int) -> str:
    names = sorted(kind.fields)
    chosen = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
    parts = [field(draw, name, kind.fields[name], depth) for name in chosen]
    return "{ " + " ".join(p for p in parts if p) + " __typename }"


def field(draw: st.DrawFn, name: str, spec: GraphQLField, depth: int) -> str:
    args = []
    for arg_name, arg in sorted(spec.args.items()):
        required = isinstance(arg.type, GraphQLNonNull)
        if required or draw(st.booleans()):
            args.append(f"{arg_name}: {literal(value_of(draw, arg.type))}")
    call = f"{name}({', '.join(args)})" if args else name
    target = unwrap(spec.type)
    if isinstance(target, GraphQLObjectType):
        if depth >= 4:
            return ""
        return f"{call} {selection(draw, target, depth + 1)}"
    return call


@st.composite
def operations(draw: st.DrawFn) -> str:
    root = SCHEMA.mutation_type if draw(st.integers(0, 4)) == 0 else SCHEMA.query_type
    assert root is not None
    name = draw(st.sampled_from(sorted(root.fields)))
    DRAWN[name] += 1
    body = field(draw, name, root.fields[name], 1) or name
    keyword = "mutation" if root is SCHEMA.mutation_type else "query"
    return f"{keyword} {{ {body} }}"


def test_generated_operations_never_fail_unshaped(client: TestClient) -> None:
    data(deploy(client, KITCHEN))
    start(client, id="k-1")
    start(client, id="k-2")
    data(fire(client, "k-2", "w", "send"))
    codes: Counter[str] = Counter()

    @settings(max_examples=1000, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(operations())
    def run(operation: str) -> None:
        response = client.post("/graphql", json={"query": operation})
        assert response.status_code < 500, (operation, response.text)
        body = response.json()
        for error in body.get("errors") or []:
            code = (error.get("extensions") or {}).get("code")
            if error.get("path") is not None:
                assert code, (operation, error)
            assert code != "internal-error", (operation, error)
            codes[code or "validation"] += 1

    run()
    assert sum(DRAWN.values()) >= 1000
    assert len(DRAWN) >= 15  # most root fields were exercised
    assert gql(client, "{ __typename }") == {"data": {"__typename": "Query"}}
