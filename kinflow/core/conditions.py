"""Conditions: render a site's variables, evaluate GROQ, classify the outcome.

This module owns conditions at run time: which variables a site
binds (the table lives in ``kinflow.define.sites`` so deploy checks the same
rules), how ``$fields`` is rendered (workflow, then stage, then activity
entries overlay; singular references dereference into snapshot documents),
and the three-valued outcome of a condition:

* ``SATISFIED``   - the value is exactly ``true``;
* ``UNSATISFIED`` - exactly ``false``;
* ``UNEVALUABLE`` - anything else (GROQ ``null`` from a missing operand, a
  non-boolean, an evaluation error). Each site decides what that means.

It also answers *when* a ``$now``-reading condition will flip
(``next_flip``), so ``nextEvaluationAt`` tells a scheduler when to tick. The
search doubles a horizon from one second until the outcome differs, then
bisects to the second; gates of the form "now is past some instant" are
monotone, which is what this finds.

Nothing here writes state or reads the lake; GROQ sees only the variables.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from kinflow import groq
from kinflow.core.cohort import counts
from kinflow.core.cohort.registry import subworkflow_rows
from kinflow.core.context import Actor, PlanContext
from kinflow.core.errors import CohortTooLargeForRows
from kinflow.core.state import Instance, ResolvedField, StageEntry
from kinflow.define import expressions, sites
from kinflow.define.models import WorkflowDefinition
from kinflow.timestamps import iso

REFERENCE_KINDS = frozenset({"doc.ref", "subject"})
#: Elements one condition may visit (nested loops counted). Conditions run on the event
#: loop over the instance's own variables: this bounds a quadratic condition over large
#: arrays without a clock, so the verdict stays deterministic (over it: unevaluable).
SNAPSHOT_MAX_SCANNED = 1_000_000
_MAX_HORIZON = timedelta(days=800)


class Outcome(enum.Enum):
    SATISFIED = "satisfied"
    UNSATISFIED = "unsatisfied"
    UNEVALUABLE = "unevaluable"


@dataclass(frozen=True, slots=True)
class Verdict:
    outcome: Outcome
    value: Any = None
    detail: str | None = None

    @property
    def satisfied(self) -> bool:
        return self.outcome is Outcome.SATISFIED


def classify(value: Any) -> Outcome:
    if value is True:
        return Outcome.SATISFIED
    if value is False:
        return Outcome.UNSATISFIED
    return Outcome.UNEVALUABLE


def evaluate_expression(text: str, variables: dict[str, Any], now: datetime) -> Any:
    """Evaluate GROQ over the variables only (no dataset); errors propagate."""
    trivial = _trivial(text, variables)
    if trivial is not _NOT_TRIVIAL:
        return trivial
    return groq.evaluate(text, params=variables, now=now,
                         budget=groq.Budget(max_scanned=SNAPSHOT_MAX_SCANNED))


_NOT_TRIVIAL = object()
_LITERALS = {"true": True, "false": False, "null": None}


def _trivial(text: str, variables: dict[str, Any]) -> Any:
    """Fast path for the commonest conditions: a literal or one bare variable."""
    stripped = text.strip()
    if stripped in _LITERALS:
        return _LITERALS[stripped]
    if stripped.startswith("$") and stripped[1:].replace("_", "a").isalnum():
        return variables.get(stripped[1:])
    return _NOT_TRIVIAL


def check(text: str | None, variables: dict[str, Any], now: datetime) -> Verdict:
    """The outcome of a condition; an absent condition is satisfied."""
    if text is None:
        return Verdict(Outcome.SATISFIED, True)
    try:
        value = evaluate_expression(text, variables, now)
    except groq.GroqError as exc:
        return Verdict(Outcome.UNEVALUABLE, None, str(exc).splitlines()[0])
    return Verdict(classify(value), value)


def reads_now(text: str) -> bool:
    return "$now" in text or "now()" in text


def next_flip(text: str, variables: dict[str, Any], now: datetime) -> datetime | None:
    """The earliest instant after ``now`` at which the condition's outcome changes."""
    if not reads_now(text):
        return None

    def at(moment: datetime) -> Outcome:
        shifted = {**variables, "now": iso(moment)}
        return check(text, shifted, moment).outcome

    current = at(now)
    step = timedelta(seconds=1)
    while step <= _MAX_HORIZON and at(now + step) == current:
        step *= 2
    if step > _MAX_HORIZON:
        return None
    low = now + step / 2 if step > timedelta(seconds=1) else now
    high = now + step
    while high - low > timedelta(milliseconds=1):
        middle = low + (high - low) / 2
        if at(middle) == current:
            low = middle
        else:
            high = middle
    return high


# ---- rendering ----


def render_fields(
    instance: Instance,
    ctx: PlanContext,
    window: sites.Window,
    activity: str | None = None,
) -> dict[str, Any]:
    """``$fields`` for a site: wider scopes first, narrower entries overlay them."""
    layers: list[list[ResolvedField]] = [instance.fields]
    entry = instance.open_entry()
    if window in ("stage", "activity") and entry is not None:
        layers.append(entry.fields)
        if window == "activity" and activity is not None:
            found = entry.activity(activity)
            if found is not None:
                layers.append(found.fields)
    rendered: dict[str, Any] = {}
    for layer in layers:
        for field in layer:
            rendered[field.name] = _render_value(field, ctx)
    return rendered


def _render_value(field: ResolvedField, ctx: PlanContext) -> Any:
    value = field.value
    if field.type_ in REFERENCE_KINDS and isinstance(value, dict) and isinstance(
        value.get("id"), str
    ):
        document = ctx.document(value["id"])
        if document is not None:
            return document
        return {"_id": value["id"].split(":", 2)[-1], "_type": value.get("type")}
    return value


def _effects(instance: Instance, entry: StageEntry | None) -> tuple[dict[str, Any], dict[str, str]]:
    outputs: dict[str, Any] = {}
    status: dict[str, str] = {}
    for run in instance.effectHistory:
        if run.status == "done":
            outputs[run.name] = run.outputs or {}
        if entry is not None and run.stageEntryKey == entry.key_ and run.status != "cancelled":
            status[run.name] = run.status
    return outputs, status


def _context(instance: Instance) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in instance.context:
        value = item.value
        if item.type_ == "context.json" and isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                value = None
        out[item.name] = value
    return out


ROW_VARIABLES = frozenset({"subworkflows", "cohort", "cohorts"})
"""Variables bound only for the expressions that read them: ``$subworkflows`` costs a
view per row, ``$cohort``/``$cohorts`` a look at the cohorts' summary."""


def always_variables(instance: Instance, ctx: PlanContext) -> dict[str, Any]:
    """The variables every site binds, except ``$fields`` and predicates (``$subworkflows``
    included; ``$cohort`` and ``$cohorts`` are the ``Renderer``'s)."""
    return {**light_variables(instance, ctx),
            "subworkflows": subworkflow_rows(instance, instance.open_entry())}


def light_variables(instance: Instance, ctx: PlanContext) -> dict[str, Any]:
    """``always_variables`` without the ones that look at the registry."""
    entry = instance.open_entry()
    activities = entry.activities if entry is not None else []
    effects, effect_status = _effects(instance, entry)
    return {
        "self": ctx.gdr(instance.id_),
        "parent": instance.ancestors[-1].id if instance.ancestors else None,
        "ancestors": [ref.id for ref in instance.ancestors],
        "stage": instance.currentStage,
        "now": ctx.now_iso,
        "context": _context(instance),
        "effects": effects,
        "effectStatus": effect_status,
        "activities": [a.to_json() for a in activities],
        "allActivitiesDone": all(a.status in ("done", "skipped") for a in activities),
        "anyActivityFailed": any(a.status == "failed" for a in activities),
    }


def subworkflows_for(instance: Instance, ctx: PlanContext, text: str | None
                     ) -> list[dict[str, Any]]:
    """``$subworkflows`` for the expression ``text``: refused with
    ``cohort-too-large-for-rows`` when the parent holds a cohort of
    ``Limits.condition_rows`` rows or more (``$cohort`` reads its counts instead)."""
    biggest = counts.largest(instance)
    if biggest is not None and biggest[2] >= ctx.limits.condition_rows:
        activity, stage_entry, size = biggest
        raise CohortTooLargeForRows(
            f"a condition reads $subworkflows, but the cohort of activity {activity!r} has "
            f"{size} rows (at most {ctx.limits.condition_rows - 1} may be read as rows); "
            "read its counts with $cohort or $cohorts instead", instanceId=instance.id_,
            activity=activity, stageEntry=stage_entry, rows=size,
            limit=ctx.limits.condition_rows, condition=(text or "")[:200])
    return subworkflow_rows(instance, instance.open_entry())


def is_assigned(instance: Instance, actor: Actor, activity: str | None) -> bool:
    """Whether an assignee field in view names the actor (by id or by role)."""
    entry = instance.open_entry()
    pools = [instance.fields, *([entry.fields] if entry else [])]
    if entry is not None and activity is not None:
        found = entry.activity(activity)
        if found is not None:
            pools.append(found.fields)
    for pool in pools:
        for field in pool:
            if field.type_ not in ("assignee", "assignees") or not isinstance(field.value, list):
                continue
            for member in field.value:
                if not isinstance(member, dict):
                    continue
                if member.get("type") == "user" and member.get("id") == actor.id:
                    return True
                if member.get("type") == "role" and member.get("role") in actor.roles:
                    return True
    return False


class Renderer:
    """Binds variables for sites of one instance state; caches what does not vary by site."""

    def __init__(self, instance: Instance, definition: WorkflowDefinition, ctx: PlanContext):
        self.instance = instance
        self.definition = definition
        self.ctx = ctx
        self._always = light_variables(instance, ctx)
        self._predicates: dict[str, Any] | None = None

    def row_variables(self, activity: str | None, text: str | None) -> dict[str, Any]:
        """``$subworkflows``, ``$cohort`` and ``$cohorts`` where ``text`` reads them (every
        one without a text). ``$cohort`` is the cohort of the site's own activity in the
        open visit; null where the site has none (a transition's ``when``) or its activity
        spawns nothing."""
        reads = ROW_VARIABLES if text is None else expressions.read_variables(text)
        out: dict[str, Any] = {}
        if "subworkflows" in reads:
            if text is None:
                out["subworkflows"] = subworkflow_rows(self.instance,
                                                       self.instance.open_entry())
            else:
                out["subworkflows"] = subworkflows_for(self.instance, self.ctx, text)
        if "cohort" in reads:
            visit = self.instance.open_entry()
            out["cohort"] = (counts.own_cohort(self.instance, self.definition, activity,
                                               visit.key_)
                             if activity is not None and visit is not None else None)
        if "cohorts" in reads:
            out["cohorts"] = counts.cohorts_object(self.instance, self.definition)
        return out

    def predicates(self) -> dict[str, Any]:
        if self._predicates is None:
            base = {**self._always, "fields": render_fields(self.instance, self.ctx, "workflow"),
                    "assigned": False}
            values: dict[str, Any] = {}
            for name, text in (self.definition.predicates or {}).items():
                verdict = check(text, {**base, **self.row_variables(None, text)}, self.ctx.now)
                values[name] = None if verdict.outcome is Outcome.UNEVALUABLE else verdict.value
            self._predicates = values
        return self._predicates

    def variables(
        self,
        site: sites.Site,
        activity: str | None = None,
        *,
        actor: Actor | None = None,
        params: dict[str, Any] | None = None,
        row: Any = None,
        text: str | None = None,
    ) -> dict[str, Any]:
        """The variables ``site`` binds; with ``text``, the registry's only where it reads
        them (``row_variables``)."""
        out = {**self.predicates(), **self._always, **self.row_variables(activity, text),
               "fields": render_fields(self.instance, self.ctx, site.window, activity)}
        if "assigned" in site.extra:
            out["assigned"] = (
                is_assigned(self.instance, actor, activity)
                if actor is not None and "actor" in site.extra else False
            )
        if "actor" in site.extra and actor is not None:
            out["actor"] = actor.to_json()
        if "params" in site.extra:
            out["params"] = params or {}
        if "row" in site.extra:
            out["row"] = row
        return out

    def check(self, text: str | None, site: sites.Site, activity: str | None = None,
              **caller: Any) -> Verdict:
        if text is None:
            return Verdict(Outcome.SATISFIED, True)
        return check(text, self.variables(site, activity, text=text, **caller), self.ctx.now)

    def value(self, text: str, site: sites.Site, activity: str | None = None,
              **caller: Any) -> Any:
        """Evaluate an expression for its value (bindings, where-clauses); errors give null."""
        try:
            return evaluate_expression(text, self.variables(site, activity, text=text,
                                                            **caller), self.ctx.now)
        except groq.GroqError:
            return None

