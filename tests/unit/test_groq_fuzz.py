"""Fuzz: 10,000 mutated suite queries never raise anything but a GroqError.

Queries come from the conformance suite (or a built-in seed list when it is absent),
then are cut, spliced, character-flipped, duplicated or truncated with a seeded RNG.
Internal errors (``groq-internal-error``) count as failures too: they mean a bug.
"""

from __future__ import annotations

import random
from typing import Any

from kinflow.groq import GroqError, GroqInternalError, evaluate, parse
from tests.conformance.suite import Suite, suite_dir

SEED = 20240601
COUNT = 10_000
ALPHABET = [
    *"[]{}()*.^@$,:|&!=<>+-/%\"'`\\0123456789abcxyz_ \n\t",
    "..", "...", "->", "=>", "**", "&&", "||", "::", "in ", "match ", "asc", "desc",
    "$p", "^.^", "[]", "@", "null", "true", "count(", "select(", "order(", "score(",
    "\\u{1F600}", "\\uD800", "1e999", "-", "fn a::b($x) = $x{a};",
]
SEEDS = [
    "*[_type == 'a' && b > 1]{c, 'd': e->f, ...}",
    "count($rows[activity == 'translate' && current && status == 'active']) == 0",
    "*[_id in path('a.**')] | order(_id desc)[0..2]",
    "select(a > 1 => 'x', b => {'y': 1}, 'z')",
    "[1, ...[2, 3], 4][1...3]",
    "* | score(boost(a match 'x*', 2), b == 1)",
    'dateTime("2020-01-01T00:00:00Z") + 1',
    "string::split(lower(name), ' ')[0]",
]
DOCS: list[dict[str, Any]] = [
    {"_id": "a", "_type": "a", "b": 2, "c": [1, {"_ref": "b"}], "e": {"_ref": "b"}},
    {"_id": "b", "_type": "b", "f": "text", "name": "Some Name", "a": 3},
]
PARAMS = {"p": 1, "rows": [{"activity": "translate", "current": True}], "x": [1, 2]}


def _corpus() -> list[str]:
    root = suite_dir()
    if root is None:
        return SEEDS
    # Long geo fixtures only slow the run down; they add nothing syntactically.
    queries = {c.query for c in Suite(root).cases if len(c.query) <= 1500}
    return sorted(queries) + SEEDS


def _mutate(rng: random.Random, corpus: list[str]) -> str:
    q = rng.choice(corpus)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(6)
        i = rng.randint(0, len(q))
        j = rng.randint(i, len(q))
        if op == 0:
            q = q[i:j]
        elif op == 1:
            other = rng.choice(corpus)
            q = q[:i] + other[rng.randint(0, len(other)):]
        elif op == 2 and q:
            k = rng.randrange(len(q))
            q = q[:k] + rng.choice(ALPHABET) + q[k + 1:]
        elif op == 3:
            q = q[:i] + rng.choice(ALPHABET) + q[i:]
        elif op == 4:
            q = q[:i] + q[j:]
        else:
            q = q[:i] + q[i:j] * rng.randint(2, 4) + q[j:]
    return q


def test_fuzzed_queries_only_raise_groq_errors() -> None:
    rng = random.Random(SEED)
    corpus = _corpus()
    outcomes = {"value": 0, "error": 0}
    internal: list[tuple[str, str]] = []
    for _ in range(COUNT):
        q = _mutate(rng, corpus)
        try:
            tree = parse(q) if rng.random() < 0.5 else parse(q, PARAMS)
            evaluate(tree, dataset=DOCS, params=PARAMS)
            outcomes["value"] += 1
        except GroqInternalError as exc:
            internal.append((q, exc.message))
        except GroqError:
            outcomes["error"] += 1
    assert not internal, internal[:5]
    assert outcomes["value"] > 100 and outcomes["error"] > 100
