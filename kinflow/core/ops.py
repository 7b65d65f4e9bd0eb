"""Ops: the state writes an action (or an edit, or an effect) performs.

This module owns every op kind and the value expressions ops read. Each op
is applied in order to the in-memory instance; each field write is checked
against the target entry's kind (``field-value-shape``) before it lands;
each op appends an ``opApplied`` row (``field.setIfMissing`` skips it when
the target already had a value); ``status.set`` also stamps the activity's
completion and appends ``activityStatusChanged``.

An op that cannot apply raises a typed error; since planning works on a copy
that is only written when the whole plan succeeds, a failed op leaves
nothing behind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kinflow.core.conditions import Renderer, check
from kinflow.core.context import PlanContext
from kinflow.core.errors import ActivityNotFound, EngineBug, FieldNotFound, FieldValueInvalid
from kinflow.core.fields import checked_value, find_field, read_path
from kinflow.core.history import record
from kinflow.core.state import Instance
from kinflow.define import sites
from kinflow.define.models import (
    ActorValue,
    AppendOp,
    DecOp,
    FieldReadValue,
    IncOp,
    LiteralValue,
    NowValue,
    ObjectValue,
    Op,
    ParamValue,
    RemoveWhereOp,
    SelfValue,
    SetIfMissingOp,
    SetOp,
    StageValue,
    StatusSetOp,
    UnsetOp,
    UpdateWhereOp,
    ValueExpr,
    WorkflowDefinition,
)
from kinflow.define.values import empty_value


@dataclass(slots=True)
class OpSource:
    """Who is applying ops, for value expressions and the ``opApplied`` rows."""

    activity: str | None = None
    action: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    edit: bool = False
    effect: str | None = None
    caller_fired: bool = True


def value_of(expr: ValueExpr, instance: Instance, ctx: PlanContext, source: OpSource) -> Any:
    if isinstance(expr, LiteralValue):
        return expr.value
    if isinstance(expr, FieldReadValue):
        found = find_field(instance, expr.scope, expr.field, source.activity)
        return read_path(found.value if found else None, expr.path)
    if isinstance(expr, ParamValue):
        return source.params.get(expr.param)
    if isinstance(expr, ActorValue):
        return ctx.actor.to_json()
    if isinstance(expr, NowValue):
        return ctx.now_iso
    if isinstance(expr, SelfValue):
        return {"id": ctx.gdr(instance.id_), "type": instance.type_}
    if isinstance(expr, StageValue):
        return instance.currentStage
    if isinstance(expr, ObjectValue):
        return {k: value_of(v, instance, ctx, source) for k, v in expr.fields.items()}
    raise EngineBug(f"unknown value expression {expr!r}")  # validation rules it out


def apply_ops(
    ops: list[Op],
    instance: Instance,
    definition: WorkflowDefinition,
    ctx: PlanContext,
    source: OpSource,
) -> None:
    for op in ops:
        apply_op(op, instance, definition, ctx, source)


def apply_op(
    op: Op, instance: Instance, definition: WorkflowDefinition, ctx: PlanContext, source: OpSource
) -> None:
    if isinstance(op, StatusSetOp):
        set_activity_status(instance, ctx, op.activity, op.status)
        _applied(instance, ctx, source, op.type, None,
                  {"activity": op.activity, "status": op.status})
        return
    target = find_field(instance, op.target.scope, op.target.field, source.activity)
    if target is None:
        raise FieldNotFound(
            f"{op.type}: no live {op.target.scope} field {op.target.field!r}",
            scope=op.target.scope, field=op.target.field, reason="field-not-live",
        )
    before = target.value
    if isinstance(op, SetOp):
        target.value = checked_value(target, value_of(op.value, instance, ctx, source),
                                     ctx.dataset)
    elif isinstance(op, SetIfMissingOp):
        if before not in (None, []):
            return
        target.value = checked_value(target, value_of(op.value, instance, ctx, source),
                                     ctx.dataset)
    elif isinstance(op, UnsetOp):
        target.value = empty_value(target.type_)
    elif isinstance(op, AppendOp):
        item = value_of(op.value, instance, ctx, source)
        items = item if isinstance(item, list) and target.type_ != "array" else [item]
        if target.type_ == "array":
            items = [_keyed(row, ctx) for row in items]
        target.value = checked_value(target, [*(before or []), *items], ctx.dataset)
    elif isinstance(op, IncOp | DecOp):
        delta = value_of(op.value, instance, ctx, source) if op.value is not None else 1
        if not isinstance(delta, int | float) or isinstance(delta, bool):
            raise FieldValueInvalid(f"{op.type}: the delta must be a number",
                                    field=target.name)
        sign = 1 if isinstance(op, IncOp) else -1
        target.value = checked_value(target, (before or 0) + sign * delta, ctx.dataset)
    elif isinstance(op, UpdateWhereOp | RemoveWhereOp):
        target.value = checked_value(
            target, _where(op, before or [], instance, definition, ctx, source), ctx.dataset
        )
    _applied(instance, ctx, source, op.type, {"scope": op.target.scope, "field": op.target.field},
             {"value": target.value} if not isinstance(op, UnsetOp) else None)


def _where(
    op: UpdateWhereOp | RemoveWhereOp,
    rows: list[Any],
    instance: Instance,
    definition: WorkflowDefinition,
    ctx: PlanContext,
    source: OpSource,
) -> list[Any]:
    site = sites.WHERE_CALLER if source.caller_fired else sites.WHERE_CASCADE
    base = Renderer(instance, definition, ctx).variables(
        site, source.activity, params=source.params, text=op.where
    )
    patch = value_of(op.value, instance, ctx, source) if isinstance(op, UpdateWhereOp) else None
    out: list[Any] = []
    for row in rows:
        matched = check(op.where, {**base, "row": row}, ctx.now).satisfied
        if not matched:
            out.append(row)
        elif isinstance(op, UpdateWhereOp):
            out.append({**row, **patch} if isinstance(row, dict) and isinstance(patch, dict)
                       else patch)
    return out


def _keyed(row: Any, ctx: PlanContext) -> Any:
    if isinstance(row, dict) and "_key" not in row:
        return {"_key": ctx.new_key(), **row}
    return row


def _applied(
    instance: Instance,
    ctx: PlanContext,
    source: OpSource,
    op_type: str,
    target: dict[str, Any] | None,
    resolved: dict[str, Any] | None,
) -> None:
    record(
        instance, ctx, "opApplied",
        stage=instance.currentStage, activity=source.activity, action=source.action,
        edit=True if source.edit else None, effect=source.effect, opType=op_type,
        target=target, resolved=resolved, actor=ctx.actor.to_json(),
    )


def set_activity_status(instance: Instance, ctx: PlanContext, activity: str, status: str) -> bool:
    """Change an activity of the open visit; ``False`` when it already had that status."""
    entry = instance.open_entry()
    found = entry.activity(activity) if entry else None
    if found is None:
        raise ActivityNotFound(
            f"activity {activity!r} is not part of the current stage visit", activity=activity,
            reason="activity-not-in-stage",
        )
    previous = found.status
    if previous == status:
        return False
    found.status = status  # type: ignore[assignment]
    if status == "active":
        found.completedAt = None
        found.completedBy = None
        found.startedAt = found.startedAt or ctx.now_iso
    else:
        found.completedAt = ctx.now_iso
        found.completedBy = ctx.actor.id
    record(instance, ctx, "activityStatusChanged", stage=instance.currentStage,
           activity=activity, **{"from": previous, "to": status}, actor=ctx.actor.to_json())
    return True
