"""The GROQ work a viewer could once get for free, as the GROQ budget test and
``bench/groq_attack.py`` replay it against a server: pairwise comparisons of two long
parameters, a value built by doubling, the same pairwise work written into a cohort
``where`` filter; and the GraphQL that sends each (the benchmark imports this module too,
so it imports nothing)."""

from __future__ import annotations

GROQ = "query($q: String!, $p: JSON) { groq(query: $q, params: $p) }"
INTERSECTS = 'array::intersects(string::split($a, ""), string::split($b, ""))'
"""Pairwise: every character of ``$a`` against every one of ``$b``."""
DOUBLING = "length(({\"a\": \"0123456789\"}" + "{\"a\": a + a}" * 24 + ").a)"
"""A 10-character string doubled 24 times (160 MB) unless a bound stops it."""
# a filter names its values literally: the same pairwise work, written into the query
HEAVY_WHERE = (f'array::intersects(string::split("{"x" * 4000}", ""), '
               f'string::split("{"y" * 4000}", ""))')

DEPLOY = "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) { warnings } }"
START = """mutation($d: String!, $f: JSON) { startInstance(definition: $d, fields: $f)
  { instance { id subworkflows { childId } } } }"""
GO = 'mutation($i: ID!) { fireAction(instanceId: $i, activity: "go", action: "go") { changed } }'


def cohort_page(activity: str) -> str:
    """A page of the cohort of ``activity`` under a ``where`` filter ``$w``."""
    return (f'query($p: ID!, $w: CohortFilter) {{ cohort(parentId: $p, activity: "{activity}") '
            "{ total page(where: $w) { nodes { rowKey } } } }")


def fire_cohort(activity: str) -> str:
    """``fireCohort`` of ``task.finish`` over the rows of ``activity``'s cohort ``$w`` selects."""
    return ('mutation($p: ID!, $w: CohortFilter) { fireCohort(parentId: $p, '
            f'activity: "{activity}", childActivity: "task", action: "finish", where: $w) '
            "{ matched } }")
