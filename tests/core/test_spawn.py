"""Pure: a spawn's children as data (seeds), registration, and its typed refusals."""

from __future__ import annotations

import pytest

from kinflow.core.cohort import spawn
from kinflow.core.commit import settle_child
from kinflow.core.context import Limits, NeedsLakeQuery
from kinflow.core.errors import SpawnDefinitionUnresolved, SpawnDepthExceeded
from kinflow.core.state import Instance
from kinflow.define.models import Action
from tests.core.spawning import child, knowing, parent
from tests.core.support import ctx, start


def fan(p: Instance) -> Action:
    activity = p.definition_model().activity("review", "translate")
    assert activity is not None and activity.actions
    return activity.actions[0]


def test_plan_spawn_returns_seeds_and_registers_nothing() -> None:
    p = start(parent())
    c = knowing(child())
    seeds = spawn.plan_spawn(p, p.definition_model(), c, "translate", fan(p))
    assert [(s.row_key, s.inputs) for s in seeds] == [("x", {"label": "x"}),
                                                       ("y", {"label": "y"})]
    entry = p.open_entry()
    assert entry is not None
    assert [s.child_id for s in seeds] == [
        spawn.child_id(p.id_, entry.key_, "translate", "fan", key) for key in ("x", "y")]
    assert seeds[0].ancestors[-1] == {"id": "lake:production:instance.t",
                                      "type": "kinflow.instance"}
    assert {(s.entry_key, s.stage, s.definition, s.seeded) for s in seeds} == {
        (entry.key_, "review", "c", False)}
    assert p.subworkflows == [] and p.history[-1]["_type"] != "spawned"


def test_register_stamps_what_the_child_is() -> None:
    p = start(parent())
    c = knowing(child(finishes=True))
    seed = spawn.plan_spawn(p, p.definition_model(), c, "translate", fan(p))[0]
    finished, owed = settle_child(p, seed, c)
    assert finished.terminal and not owed
    spawn.register(p, c, seed, finished)
    row = p.subworkflows[0]
    assert (row.rowKey, row.child_id) == ("x", seed.child_id)
    assert row.observed is not None and row.observed.status == "done"
    assert row.resolved is not None and row.resolved.stage == "done"
    assert row.seed is None
    assert [h["_type"] for h in p.history[-2:]] == ["spawned", "subworkflowResolved"]


def test_a_large_spawn_keeps_seeds_on_its_rows() -> None:
    p = start(parent())
    c = knowing(child(), limits=Limits(spawn_txn=1))
    seeds = spawn.plan_spawn(p, p.definition_model(), c, "translate", fan(p))
    assert all(s.seeded for s in seeds)
    spawn.register(p, c, seeds[1], settle_child(p, seeds[1], c)[0])
    row = p.subworkflows[0]
    assert row.seed is not None and (row.seed.version, row.seed.fields) == (1, {"label": "y"})
    again = spawn.reseed(p, row, c.definition("c", None) or {}, c)
    assert again == seeds[1]


def test_refusals_come_before_any_row_is_read() -> None:
    p = start(parent("*[_type == 'row'][]._id"))
    with pytest.raises(SpawnDefinitionUnresolved):
        spawn.plan_spawn(p, p.definition_model(), ctx(definitions={("c", None): None}),
                         "translate", fan(p))
    deep = knowing(child(), limits=Limits(spawn_depth=0))
    with pytest.raises(SpawnDepthExceeded):
        spawn.plan_spawn(p, p.definition_model(), deep, "translate", fan(p))
    with pytest.raises(NeedsLakeQuery):  # the lake rows are asked for, through the handshake
        spawn.plan_spawn(p, p.definition_model(), knowing(child()), "translate", fan(p))
