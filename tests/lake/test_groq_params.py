"""misc/params.yml over the lake: an unbound parameter is refused on every path.

The in-memory runner refuses ``$p`` with no ``p``; the lake path answered some
such queries from its MongoDB prefilter alone (a count, a pushed-down filter)
without ever checking the parameters were bound.
"""

from __future__ import annotations

from typing import Any

import pytest

from kinflow.engine import Engine
from kinflow.groq import GroqError
from kinflow.groq.store import query_collection
from kinflow.storage import Lake
from tests.conformance.run import normalise, same
from tests.conformance.suite import Suite, suite_dir

pytestmark = pytest.mark.lake


@pytest.fixture
async def engine(lake: Lake) -> Engine:
    built = Engine(lake)
    await built.ensure_ready()
    return built

UNBOUND = ["$p == 42", "$p == null", "$p", "count(*[_type == $p])", "*[_type == $p]",
           "*[_type == $p][0]", "*[_type == 'a' && n > $p]", "count(*[n == $p])",
           "*[_type == $t]{_id}", "*[_type == 'a'] | order(n desc)[0...$p]"]


@pytest.mark.parametrize("query", UNBOUND)
async def test_an_unbound_parameter_is_refused_over_the_lake(engine: Engine, query: str) -> None:
    await engine.lake.create({"_id": "d1", "_type": "a", "n": 1})
    with pytest.raises(GroqError) as refused:
        await engine.query(query)
    assert "parameter" in refused.value.message
    await engine.query(query, {"p": 1, "t": "a"})  # bound, the same query answers


async def test_the_suites_params_cases_pass_over_the_lake(lake: Lake) -> None:
    """All 23 cases of misc/params.yml through the push-down path, datasets stored."""
    root = suite_dir()
    if root is None:
        pytest.skip("GROQ test suite not found (set KINFLOW_GROQ_SUITE)")
    suite = Suite(root)
    cases = [c for c in suite.cases if c.filename == "misc/params.yml"]
    assert len(cases) == 23 and sum(not c.valid for c in cases) == 3
    generated = await lake.ensure_dataset("generated")
    await generated.insert_many(case_docs(suite.generated.docs))
    empty = await lake.ensure_dataset("empty")
    failed = []
    for case in cases:
        collection = generated if case.dataset_kind == "generated" else empty
        try:
            got = await query_collection(collection, case.query, params=case.params)
        except GroqError:
            if case.valid:
                failed.append(case.query)
            continue
        if not case.valid or not same(normalise(got), normalise(case.result)):
            failed.append(case.query)
    assert failed == []


def case_docs(docs: list[Any]) -> list[dict[str, Any]]:
    return [dict(d) for d in docs if isinstance(d, dict)]
