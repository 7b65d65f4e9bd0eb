"""Generators of bad input: mutated definitions, malformed GROQ, wrong types, unknown ids.

Each generator yields ``(label, operation, variables)``: a GraphQL operation
that must be refused. The mutations are chosen so that none can be valid by
accident (a required key removed, a value of the wrong JSON type, an unknown
key, a dangling stage name), so "refused" is the only right answer.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any

DEPLOY = "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) { definitions { name } } }"
START = ("mutation($def: String!, $f: JSON) { startInstance(definition: $def, fields: $f) "
         "{ instance { id } } }")
FIRE = ("mutation($id: ID!, $a: String!, $b: String!, $p: JSON) { fireAction(instanceId: $id, "
        "activity: $a, action: $b, params: $p) { changed } }")
EDIT = ("mutation($id: ID!, $f: String!, $v: JSON) { editField(instanceId: $id, field: $f, "
        "value: $v) { changed } }")
MALFORMED_GROQ = ("count(", "*[_type == ", "$fields.[", "1 +", "]]", "*[", "{\"a\": }", "@@",
                  "select(", "a ||| b")
Case = tuple[str, str, dict[str, Any]]


def _paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*path, key))
    elif isinstance(node, list):
        for n, value in enumerate(node):
            yield from _paths(value, (*path, n))


def _at(node: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        node = node[step]
    return node


def _wrong_type(value: Any) -> Any:
    if isinstance(value, str):
        return 12345
    if isinstance(value, bool | int | float):
        return {"not": "a scalar"}
    if isinstance(value, list):
        return "not a list"
    return ["not", "an", "object"]


def mutated_definitions(valid: dict[str, Any], rng: random.Random, count: int
                        ) -> Iterator[tuple[str, dict[str, Any]]]:
    """``count`` definitions, each one certain mutation away from ``valid``."""
    nodes = [(p, v) for p, v in _paths(valid) if p]
    objects = [p for p, v in _paths(valid) if isinstance(v, dict)]
    stages = [p for p, v in _paths(valid) if p and p[-1] == "to"]
    for n in range(count):
        broken = copy.deepcopy(valid)
        kind = n % 4
        if kind == 0:
            key = rng.choice(["name", "title", "initialStage", "stages"])
            del broken[key]
            label = f"without {key}"
        elif kind == 1:
            path, value = rng.choice([(p, v) for p, v in nodes if isinstance(p[-1], str)])
            _at(broken, path[:-1])[path[-1]] = _wrong_type(value)
            label = f"wrong type at {'.'.join(map(str, path))}"
        elif kind == 2:
            path = rng.choice(objects)
            _at(broken, path)[f"bogus{n}"] = True
            label = f"unknown key under {'.'.join(map(str, path)) or 'root'}"
        else:
            path = rng.choice(stages)
            _at(broken, path[:-1])["to"] = f"nowhere-{n}"
            label = f"dangling stage at {'.'.join(map(str, path))}"
        yield label, broken


def expression_sites(valid: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Every place a definition holds GROQ: ``when``, ``forEach`` and ``with`` values."""
    found = []
    for path, value in _paths(valid):
        if not path or not isinstance(value, str):
            continue
        if path[-1] in {"when", "forEach"} or (len(path) > 1 and path[-2] == "with"):
            found.append(path)
    return found


def malformed_groq(valid: dict[str, Any], rng: random.Random) -> Iterator[tuple[str, Any]]:
    """The definition with one expression site made unparseable, for every site."""
    for path in expression_sites(valid):
        broken = copy.deepcopy(valid)
        _at(broken, path[:-1])[path[-1]] = rng.choice(MALFORMED_GROQ)
        yield f"malformed GROQ at {'.'.join(map(str, path))}", broken


def wrong_values(instance: str, child: str) -> list[Case]:
    """Fields, params and GraphQL arguments of the wrong type or naming nothing."""
    return [
        ("start: subject is a number", START, {"def": "article-review", "f": {"subject": 42}}),
        ("start: subject is a list", START, {"def": "article-review", "f": {"subject": [1]}}),
        ("start: fields is a string", START, {"def": "article-review", "f": "subject"}),
        ("start: unknown field", START, {"def": "article-review",
                                         "f": {"subject": "article-1", "nope": 1}}),
        ("start: required field missing", START, {"def": "article-review", "f": {}}),
        ("fire: params is a list", FIRE, {"id": instance, "a": "write", "b": "submit",
                                          "p": [1, 2]}),
        ("fire: undeclared params", FIRE, {"id": instance, "a": "write", "b": "submit",
                                           "p": {"x": 1}}),
        ("fire: unknown activity", FIRE, {"id": instance, "a": "nope", "b": "submit"}),
        ("fire: caller fires a cascade action", FIRE, {"id": instance, "a": "translate",
                                                       "b": "fan-out"}),
        ("edit: field not editable", EDIT, {"id": instance, "f": "subject", "v": "x"}),
        ("edit: unknown field", EDIT, {"id": child, "f": "nope", "v": 1}),
        ("graphql: id is an object", FIRE, {"id": {"a": 1}, "a": "write", "b": "submit"}),
        ("graphql: activity is a number", FIRE, {"id": instance, "a": 7, "b": "submit"}),
        ("graphql: definitions is not a list", DEPLOY, {"d": "nope"}),
        ("deploy: a definition is a string", DEPLOY, {"d": ["just text"]}),
        ("deploy: an empty object", DEPLOY, {"d": [{}]}),
    ]


def unknown_ids() -> list[Case]:
    return [
        ("fire: unknown instance", FIRE, {"id": "instance.nope", "a": "write", "b": "submit"}),
        ("start: unknown definition", START, {"def": "no-such-definition", "f": {}}),
        ("abort: unknown instance",
         "mutation { abortInstance(instanceId: \"instance.nope\") { changed } }", {}),
        ("tick: unknown instance", "mutation { tick(instanceId: \"nope\") { changed } }", {}),
        ("complete: unknown effect", "mutation { completeEffect(instanceId: \"instance.nope\", "
         "effectKey: \"k\", status: DONE) { changed } }", {}),
        ("cohort: unknown parent", "{ cohort(parentId: \"instance.nope\", activity: \"x\") "
         "{ total } }", {}),
        ("groq: malformed query", "query($q: String!) { groq(query: $q) }", {"q": "*[_type =="}),
    ]
