"""Definitions for the settlement tests (deadlines, retries, quorum): ``p`` spawns ``c``."""

from __future__ import annotations

from typing import Any

from kinflow.core.state import Instance
from kinflow.engine import Engine
from tests.engine.cohort_defs import WAITING, items, parent
from tests.engine.outcome_defs import worker


def settling(**keys: Any) -> dict[str, Any]:
    """``p`` whose spawn has ``keys`` (childTimeoutSeconds, retry, completeWhen, ...)."""
    definition = parent(settled=WAITING)
    spawn = definition["stages"][1]["activities"][0]["actions"][0]["spawn"]
    spawn.update(keys)
    return definition


async def start(engine: Engine, definition: dict[str, Any], names: list[str]) -> Instance:
    await engine.deploy([definition, worker()])
    begun = await engine.start_instance("p", fields=items(*names))
    return (await engine.fire_action(begun.instance.id_, "go", "go")).instance


def rows(instance: Instance) -> dict[str, Any]:
    return {r.rowKey: r for r in instance.subworkflows}


def history(instance: Instance, type_: str) -> list[dict[str, Any]]:
    return [h for h in instance.history if h.get("_type") == type_]


async def child(engine: Engine, child_id: str) -> dict[str, Any]:
    found = await engine.lake.find({"_id": child_id})
    assert found, child_id
    return found[0]
