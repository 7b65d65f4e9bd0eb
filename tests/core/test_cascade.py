"""Pure: a hop hands its spawns to the spawner it was given, and stops when it declines."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kinflow.core.cascade import hop
from kinflow.core.cohort.spawn import ChildSeed
from kinflow.core.create import StartInstance, plan_create
from kinflow.core.errors import EngineBug
from kinflow.core.stages import prime
from kinflow.core.state import Instance
from tests.core.spawning import child, knowing, parent
from tests.core.support import deployed


def primed(raw: dict[str, object]) -> Instance:
    """Created and primed, its first hop not run yet."""
    c = knowing(child())
    instance = plan_create(StartInstance(deployed(raw), None, "instance.p"), c)
    prime(instance, instance.definition_model(), c)
    return instance


def test_a_declining_spawner_stops_the_hop_before_any_row_is_read() -> None:
    instance = primed(parent("*[_type == 'row'][]._id", when="true"))
    asked: list[Instance] = []

    def declining(target: Instance, plan: Callable[[], list[ChildSeed]]) -> bool:
        asked.append(target)
        return False  # plan() is never called: no lake read, no registration

    result = hop(instance, instance.definition_model(), knowing(child()), declining)
    assert result.waited and not result.moved
    assert result.fired == [("translate", "fan")] and asked == [instance]
    assert instance.subworkflows == []


def test_a_taking_spawner_gets_the_seeds() -> None:
    instance = primed(parent(when="true"))
    taken: list[str] = []

    def taking(target: Instance, plan: Callable[[], list[ChildSeed]]) -> bool:
        taken.extend(seed.row_key for seed in plan())
        return True

    result = hop(instance, instance.definition_model(), knowing(child()), taking)
    assert taken == ["x", "y"] and not result.waited


def test_a_spawn_in_a_hop_given_no_spawner_is_a_kinflow_bug() -> None:
    instance = primed(parent(when="true"))
    with pytest.raises(EngineBug) as refused:
        hop(instance, instance.definition_model(), knowing(child()))
    assert refused.value.code == "internal-error"
