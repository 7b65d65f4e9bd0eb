"""docs/definitions.md: every example deploys as written and fits the published schema."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kinflow.core.cohort.registry import subworkflow_rows
from kinflow.define.schema import SCHEMA_FILE
from kinflow.engine import Engine

pytestmark = pytest.mark.lake

PAGE = Path(__file__).resolve().parents[2] / "docs" / "definitions.md"
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def fenced(info: str) -> list[str]:
    return [body for tag, body in FENCE.findall(PAGE.read_text()) if tag.strip() == info]


EXAMPLES = fenced("json definition")


def example(name: str) -> list[dict[str, Any]]:
    for body in EXAMPLES:
        data = json.loads(body)
        batch = data if isinstance(data, list) else [data]
        if any(d["name"] == name for d in batch):
            return batch
    raise LookupError(name)


def test_the_page_has_examples_and_none_goes_untested() -> None:
    assert len(EXAMPLES) >= 10
    assert fenced("json") == []  # a JSON block is a deployed example, or not JSON at all


@pytest.mark.parametrize("body", EXAMPLES, ids=lambda b: json.loads(b)[0]["name"]
                         if b.lstrip().startswith("[") else json.loads(b)["name"])
async def test_each_example_fits_the_schema_and_deploys(engine: Engine, body: str) -> None:
    data = json.loads(body)
    schema = json.loads(SCHEMA_FILE.read_text())
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(data)) == []
    batch = data if isinstance(data, list) else [data]
    outcome = await engine.deploy(batch)
    assert sorted((d.name, d.status) for d in outcome.definitions) == sorted(
        (d["name"], "created") for d in batch)


async def test_the_expense_report_runs_as_the_page_says(engine: Engine) -> None:
    await engine.deploy(example("expense-report"))
    lines = [{"id": "l1", "amount": 40}, {"id": "l2", "amount": 12.5, "note": "taxi"},
             {"id": "l3", "amount": 8}]
    started = await engine.start_instance("expense-report", fields={"lines": lines})
    pid = started.instance.id_

    async def rows() -> dict[str, dict[str, Any]]:
        parent = await engine.get_instance(pid)
        return {r["rowKey"]: r for r in subworkflow_rows(parent, parent.open_entry())}

    first = await rows()  # each line's id is its row's identity; a window of two
    assert {k: r["status"] for k, r in first.items()} == {
        "l1": "active", "l2": "active", "l3": "queued"}
    child = await engine.get_instance(first["l2"]["_id"])
    assert {f.name: f.value for f in child.fields}["amount"] == 12.5
    await engine.fire_action(first["l1"]["_id"], "decide", "approve")
    await engine.fire_action(first["l2"]["_id"], "decide", "reject",
                             params={"reason": "no receipt"})
    after = await rows()  # one rejection is within the budget: the window moves on
    assert after["l2"]["outcome"] == "failed"
    assert after["l2"]["outputs"] == {"amount": 12.5, "decision": "no receipt"}
    await engine.fire_action(after["l3"]["_id"], "decide", "approve")
    assert (await engine.get_instance(pid)).currentStage == "paid"
