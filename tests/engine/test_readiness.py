"""Every verb makes its engine ready the same way: indexes declared before the first commit.

An engine a program builds without calling ``ensure_ready`` must still find
its dataset indexed on the first verb it runs, whichever verb that is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kinflow.core.errors import InstanceNotFound
from kinflow.engine import Engine
from kinflow.storage import Lake

MISSING = "instance.01JREADY0000000000000000000"

VERBS: dict[str, Callable[[Engine], Awaitable[Any]]] = {
    "fire_action": lambda e: e.fire_action(MISSING, "a", "b"),
    "tick": lambda e: e.tick(MISSING),
    "edit_field": lambda e: e.edit_field(MISSING, "f", 1),
    "abort_instance": lambda e: e.abort_instance(MISSING),
    "set_stage": lambda e: e.set_stage(MISSING, "s"),
}


@pytest.mark.parametrize("verb", sorted(VERBS))
async def test_the_first_verb_of_a_fresh_engine_declares_its_indexes(
        lake: Lake, verb: str) -> None:
    dataset = f"ready-{verb.replace('_', '-')}"
    engine = Engine(lake, dataset=dataset)
    with pytest.raises(InstanceNotFound):
        await VERBS[verb](engine)
    names = set(await lake.collection(dataset).index_information())
    assert "instance_parent" in names
