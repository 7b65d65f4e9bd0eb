"""Pure: the size limits and registration in batches (core/cohort/batches.py, registration.py)."""

from __future__ import annotations

from typing import Any

import pytest

from kinflow.core import verbs
from kinflow.core.cohort import batches
from kinflow.core.cohort.registration import plan_register
from kinflow.core.context import Actor, BatchRequest, Limits, PlanContext, RowBatch
from kinflow.core.errors import FanOutLimit
from kinflow.core.state import Instance
from tests.core.spawning import child, knowing, parent
from tests.core.support import start

LAKE = "*[_type == 'item']{_id}"
AT = "2026-01-01T12:00:00.000Z"


def lake_parent(max_active: int | None = 2) -> dict[str, Any]:
    raw = parent(LAKE)
    spawn = raw["stages"][0]["activities"][0]["actions"][0]["spawn"]
    spawn["with"] = {"label": "$row._id"}
    if max_active is not None:
        spawn["maxActive"] = max_active
    return raw


def answering(c: PlanContext, request: BatchRequest, rows: list[str], last: str | None,
              done: bool) -> None:
    c.query_results[request.key] = RowBatch(rows=[{"_id": r} for r in rows], last=last,
                                            done=done, at=AT)


def context(**limits: Any) -> PlanContext:
    return knowing(child(), limits=Limits(registration_batch=3, **limits),
                   actor=Actor.person("ann", "editor"))


def first(c: PlanContext, rows: list[str], *, done: bool = False) -> Instance:
    answering(c, BatchRequest(LAKE, {}, None, None, 3), rows, rows[-1] if rows else None, done)
    p = start(lake_parent())
    return verbs.plan_fire_action(p, verbs.FireAction("translate", "fan"), c).instance


def point(p: Instance) -> dict[str, Any] | None:
    own = batches.setting(p, (p.subworkflows[0].activity, p.subworkflows[0].stageEntry))
    return own.registration if own is not None else None


# ---- which forEach is read in batches ----


@pytest.mark.parametrize(("text", "expected"), [
    ("*[_type == 'a']", True),
    ("*[_type == 'a' && stale]{_id, site}", True),
    ("*[_type == 'a']._id", True),
    ("*[_type == 'a'][]._id", True),
    ("*[_type == 'a'] | order(_id asc)", False),
    ("*[_type == 'a'][0..10]", False),
    ("*[_type == 'a']{_id, 'n': count(*[_type == 'b'])}", False),
    ("$fields.items", False),
    ("*[", False),
])
def test_only_a_per_match_query_is_read_in_batches(text: str, expected: bool) -> None:
    assert batches.batchable(text) is expected


def test_a_document_created_after_the_spawn_is_no_member() -> None:
    request = BatchRequest("*[_type == 'a']._id", {}, None, AT, 10)
    docs = [{"_id": "a1", "_type": "a", "_createdAt": "2026-01-01T11:00:00.000Z"},
            {"_id": "a2", "_type": "a", "_createdAt": "2026-01-01T12:00:00.001Z"},
            {"_id": "a3", "_type": "a"},  # written around the lake's API: counted as before
            {"_id": "b1", "_type": "b"}]
    assert batches.rows_of(request, docs, None) == ["a1", "a3"]


def test_the_type_a_filter_names_narrows_what_a_batch_reads() -> None:
    assert batches.pinned_type("*[_type == 'a' && x > 1]", {}) == "a"
    assert batches.pinned_type("*[_type == $t]", {"t": "b"}) == "b"
    assert batches.pinned_type("*[_type in ['a', 'b']]", {}) is None
    assert batches.pinned_type("*[stale]", {}) is None


@pytest.mark.parametrize("key", ["item-04", "article-0050999", "instance.c" + "f" * 24, "z"])
def test_a_bound_is_always_past_its_key_and_keys_order_like_numbers(key: str) -> None:
    for scale in (0, 10, 200, 700):
        bound = batches.bound_after(key, scale)
        assert bound is not None and bound > key
    assert batches.key_text(batches.key_number(key)) == key
    assert batches.key_number("item-04") < batches.key_number("item-05")
    assert batches.bound_after("a", 10_000) is None  # past the last possible key


# ---- limits ----


def test_a_cohort_without_a_window_is_refused_past_max_active_children() -> None:
    c = knowing(child(), limits=Limits(max_active_children=2))
    p = start(parent('["a", "b", "c"]'))
    with pytest.raises(FanOutLimit) as refused:
        verbs.plan_fire_action(p, verbs.FireAction("translate", "fan"), c)
    assert refused.value.details["reason"] == "no-window"
    assert refused.value.details["limit"] == 2


def test_a_windowed_cohort_may_pass_max_active_children_up_to_the_fan_out_limit() -> None:
    raw = parent('["a", "b", "c"]')
    raw["stages"][0]["activities"][0]["actions"][0]["spawn"]["maxActive"] = 1
    p = verbs.plan_fire_action(start(raw), verbs.FireAction("translate", "fan"), knowing(
        child(), limits=Limits(max_active_children=2))).instance
    assert len(p.subworkflows) == 3
    with pytest.raises(FanOutLimit) as refused:
        verbs.plan_fire_action(start(raw), verbs.FireAction("translate", "fan"),
                               knowing(child(), limits=Limits(fan_out=2)))
    assert refused.value.details["reason"] == "fan-out"


def test_the_default_limits() -> None:
    assert (Limits().fan_out, Limits().max_active_children) == (1_000_000, 10_000)


# ---- the spawn's first batch and the checkpoint ----


def test_a_spawn_registers_its_first_batch_and_keeps_a_checkpoint() -> None:
    c = context()
    p = first(c, ["i1", "i2", "i3"])
    assert [r.rowKey for r in p.subworkflows] == ["i1", "i2", "i3"]
    assert [bool(r.queued) for r in p.subworkflows] == [False, False, True]
    assert point(p) == {"after": "i3", "at": AT, "params": {}, "action": "fan",
                        "actor": {"kind": "person", "id": "ann", "roles": ["editor"]},
                        "rows": 3, "version": 1, "scale": None}
    assert p.owesRegistration is True


def test_a_spawn_whose_only_batch_was_the_last_keeps_no_checkpoint() -> None:
    p = first(context(), ["i1"], done=True)
    assert point(p) is None and p.owesRegistration is None


def test_a_spawn_reads_on_until_a_batch_has_a_row() -> None:
    c = context()
    # the first read found no match among its documents (it read up to x3)
    answering(c, BatchRequest(LAKE, {}, None, None, 3), [], "x3", False)
    answering(c, BatchRequest(LAKE, {}, "x3", AT, 3), ["i1"], "i9", False)
    p = verbs.plan_fire_action(start(lake_parent()), verbs.FireAction("translate", "fan"),
                               c).instance
    assert [r.rowKey for r in p.subworkflows] == ["i1"] and point(p)["after"] == "i9"


# ---- later batches ----


def test_a_batch_commit_registers_queued_rows_and_moves_the_checkpoint() -> None:
    c = context()
    p = first(c, ["i1", "i2", "i3"])
    later = knowing(child(), limits=Limits(registration_batch=3))
    answering(later, BatchRequest(LAKE, {}, "i3", AT, 3), ["i4", "i5"], "i6", False)
    after = plan_register(p, later).instance
    assert [r.rowKey for r in after.subworkflows] == ["i1", "i2", "i3", "i4", "i5"]
    assert all(r.queued for r in after.subworkflows[2:])
    assert after.subworkflows[3].seed is not None
    assert after.subworkflows[3].seed.fields == {"label": "i4"}
    assert point(after)["after"] == "i6" and point(after)["rows"] == 5
    answering(later, BatchRequest(LAKE, {}, "i6", AT, 3), ["i7"], "i7", True)
    done = plan_register(after, later).instance
    assert [r.rowKey for r in done.subworkflows][-1] == "i7"
    assert point(done) is None and done.owesRegistration is None


def test_a_batch_past_the_fan_out_limit_is_refused() -> None:
    c = context(fan_out=4)
    p = first(c, ["i1", "i2", "i3"])
    answering(c, BatchRequest(LAKE, {}, "i3", AT, 3), ["i4", "i5"], "i6", False)
    with pytest.raises(FanOutLimit):
        plan_register(p, c)


def test_a_completed_or_closed_cohort_registers_no_more() -> None:
    c = context()
    p = first(c, ["i1", "i2", "i3"])
    own = batches.setting(p, ("translate", p.subworkflows[0].stageEntry))
    assert own is not None
    for change in ({"completedAt": AT}, {"closedAt": AT, "closedBy": "abortCohort"}):
        q = p.model_copy(deep=True)
        q.cohorts = [own.model_copy(update=change)]
        after = plan_register(q, knowing(child())).instance  # no batch read: none answered
        assert len(after.subworkflows) == 3
        assert point(after) is None and after.owesRegistration is None
