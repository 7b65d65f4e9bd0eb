"""Ops: each writes through the field's kind check, records itself, and refuses typed."""

from __future__ import annotations

from typing import Any

import pytest

from kinflow.core.errors import ContractViolation, FieldValueInvalid
from kinflow.core.ops import OpSource, apply_op, set_activity_status
from kinflow.define.models import FieldRef, LiteralValue, SetOp
from tests.core.support import ctx, definition, history_types, start


def counted() -> dict[str, Any]:
    return definition("ops", [
        {"name": "a", "activities": [{"name": "w"}],
         "transitions": [{"name": "t", "to": "b", "when": "false"}]},
        {"name": "b"},
    ], fields=[{"name": "n", "type": "number",
                "initialValue": {"type": "literal", "value": 1}}])  # fmt: skip


def set_op(field: str, value: Any, scope: str = "workflow") -> SetOp:
    return SetOp(type="field.set", target=FieldRef(scope=scope, field=field),
                 value=LiteralValue(type="literal", value=value))  # fmt: skip


def test_a_set_checks_the_kind_and_records_an_op_row() -> None:
    instance = start(counted())
    model = instance.definition_model()
    apply_op(set_op("n", 7), instance, model, ctx(), OpSource(activity="w"))
    assert instance.fields[0].value == 7 and history_types(instance)[-1] == "opApplied"
    with pytest.raises(FieldValueInvalid):
        apply_op(set_op("n", "seven"), instance, model, ctx(), OpSource(activity="w"))
    with pytest.raises(ContractViolation):
        apply_op(set_op("ghost", 1), instance, model, ctx(), OpSource(activity="w"))


def test_activity_status_changes_once() -> None:
    instance = start(counted())
    assert set_activity_status(instance, ctx(), "w", "done")
    assert not set_activity_status(instance, ctx(), "w", "done")
    entry = instance.open_entry()
    assert entry is not None
    done = entry.activity("w")
    assert done is not None and done.completedAt is not None
    assert set_activity_status(instance, ctx(), "w", "active")
    assert done.completedAt is None
    with pytest.raises(ContractViolation):
        set_activity_status(instance, ctx(), "nope", "done")
