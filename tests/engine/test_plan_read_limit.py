"""A plan's lake reads are bounded: past the bound it is a limit, not a caller bug.

Each ``initialValue`` query at stage entry is one more round of "plan, ask the
shell for a read, plan again" (its parameters carry the fields resolved before
it). A definition with more query fields than the bound is refused with
``plan-read-limit`` (it used to be ``contract-violation``), and nothing is written.
"""

from __future__ import annotations

from typing import Any

import pytest

from kinflow.core.errors import PlanReadLimit
from kinflow.core.state import INSTANCE_TYPE
from kinflow.engine import Engine
from tests.engine.definitions import simple

pytestmark = pytest.mark.lake


def counting(name: str, queries: int) -> dict[str, Any]:
    fields = [{"name": f"n{i}", "type": "number",
               "initialValue": {"type": "query", "query": f"count(*[_type == 'article']) + {i}"}}
              for i in range(queries)]  # fmt: skip
    return simple(name, [
        {"name": "a", "activities": [{"name": "w", "actions": [{"name": "go", "status": "done"}]}],
         "transitions": [{"name": "t", "to": "b"}]},
        {"name": "b"},
    ], fields=fields)


async def test_too_many_reads_is_a_plan_read_limit_and_writes_nothing(engine: Engine) -> None:
    await engine.deploy([counting("many", 40), counting("some", 20)])
    with pytest.raises(PlanReadLimit) as refused:
        await engine.start_instance("many")
    assert refused.value.code == "plan-read-limit"
    assert refused.value.details == {"rounds": 32}
    assert await engine.lake.count({"_type": INSTANCE_TYPE}) == 0
    started = await engine.start_instance("some")
    assert [f.value for f in started.instance.fields] == list(range(20))
