"""The semantic rules of a parsed definition: names, reachability, sites, windows.

The second half of deploy validation (``kinflow.define.validate`` expands and
strict-parses first, then runs ``InvariantChecker`` on the parsed tree): one
walk over the definition collecting invariant violations
and, for every expression, the problems of its site (syntax, lake scans where
not allowed, unbound variables, static ``$fields`` reads outside the site's
window). Pure, and it never raises for a bad definition: problems are ``Issue`` rows.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kinflow.define import expressions, sites
from kinflow.define.budget import budget_problems
from kinflow.define.cohort_keys import cohort_expressions, cohort_key_problems
from kinflow.define.models import (
    Action,
    Activity,
    AppendOp,
    DecOp,
    FieldEntry,
    FieldReadSource,
    FieldReadValue,
    FieldRef,
    IncOp,
    LiteralSource,
    ObjectValue,
    Op,
    ParamValue,
    QuerySource,
    RemoveWhereOp,
    Stage,
    StatusSetOp,
    UpdateWhereOp,
    ValueExpr,
    WorkflowDefinition,
)
from kinflow.define.values import kind_problem

NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
ARRAY_OPS = (AppendOp, UpdateWhereOp, RemoveWhereOp)
ARRAY_TARGET_KINDS = frozenset({"array", "doc.refs", "assignee", "assignees"})


@dataclass(frozen=True, slots=True)
class Issue:
    """One problem: which definition, where in it, and what is wrong."""

    definition: str
    path: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"definition": self.definition, "path": self.path, "message": self.message}


class InvariantChecker:
    """Walks one parsed definition and collects its issues."""

    def __init__(self, model: WorkflowDefinition, label: str | None = None) -> None:
        self.model = model
        self.label = model.name if label is None else label
        self.issues: list[Issue] = []
        self.workflow_fields = {f.name: f for f in model.fields or []}
        self.predicates = set((model.predicates or {}).keys())
        # by name, first one wins (as WorkflowDefinition.stage): lookups stay O(1), so a
        # definition with thousands of stages validates in linear time
        self.stages: dict[str, Stage] = {}
        for stage in model.stages:
            self.stages.setdefault(stage.name, stage)

    def _stage(self, name: str) -> Stage | None:
        return self.stages.get(name)

    def add(self, path: str, message: str) -> None:
        self.issues.append(Issue(self.label, path, message))

    def run(self) -> None:
        m = self.model
        if not NAME.match(m.name):
            self.add("name", f"name {m.name!r} must match {NAME.pattern}")
        stage_names = [s.name for s in m.stages]
        self._unique(stage_names, "stages", "stage")
        if self._stage(m.initialStage) is None:
            self.add("initialStage", f"initialStage {m.initialStage!r} names no declared stage")
        if not m.stages:
            self.add("stages", "a workflow needs at least one stage")
        self._check_fields(m.fields or [], "fields", "workflow", {})
        self._check_predicates()
        effect_names: list[tuple[str, str]] = []
        for si, stage in enumerate(m.stages):
            self._check_stage(stage, f"stages[{si}]", effect_names)
        seen: set[str] = set()
        for name, path in effect_names:
            if name in seen:
                self.add(path, f"effect name {name!r} is declared twice in this definition")
            seen.add(name)
        self._check_reachability()
        self._check_outputs()
        if m.cancelStage is not None and self._stage(m.cancelStage) is None:
            self.add("cancelStage", f"cancelStage {m.cancelStage!r} names no declared stage")

    def _check_outputs(self) -> None:
        """``outputs`` name workflow-scope fields, each once (what a parent's row gets)."""
        outputs = self.model.outputs
        if outputs is None:
            return
        seen: set[str] = set()
        for i, name in enumerate(outputs):
            if name not in self.workflow_fields:
                self.add(f"outputs[{i}]", f"output {name!r} names no workflow-scope field")
            elif name in seen:
                self.add(f"outputs[{i}]", f"output {name!r} is listed twice")
            seen.add(name)

    # ---- structure ----

    def _unique(self, names: list[str], path: str, what: str) -> None:
        seen: set[str] = set()
        for i, name in enumerate(names):
            if name in seen:
                self.add(f"{path}[{i}].name", f"duplicate {what} name {name!r}")
            seen.add(name)

    def _check_reachability(self) -> None:
        m = self.model
        if self._stage(m.initialStage) is None:
            return
        # a declared cancel stage is entered by a cancellation (core/cancel_instance.py)
        roots = [m.initialStage]
        if m.cancelStage is not None and self._stage(m.cancelStage) is not None:
            roots.append(m.cancelStage)
        reached = set(roots)
        frontier = list(roots)
        while frontier:
            stage = self._stage(frontier.pop())
            for t in (stage.transitions or []) if stage else []:
                if t.to not in reached and self._stage(t.to) is not None:
                    reached.add(t.to)
                    frontier.append(t.to)
        for si, stage in enumerate(m.stages):
            if stage.name not in reached:
                self.add(f"stages[{si}]", f"stage {stage.name!r} is unreachable from "
                         f"{m.initialStage!r}")

    def _check_stage(self, stage: Stage, path: str, effects: list[tuple[str, str]]) -> None:
        activities = stage.activities or []
        transitions = stage.transitions or []
        self._unique([a.name for a in activities], f"{path}.activities", "activity")
        self._unique([t.name for t in transitions], f"{path}.transitions", "transition")
        if stage.terminal and activities:
            self.add(f"{path}.activities", f"terminal stage {stage.name!r} (no transitions) "
                     "may not declare activities")
        if stage.outcome is not None and not stage.terminal:
            self.add(f"{path}.outcome", f"only a terminal stage declares an outcome; "
                     f"{stage.name!r} has transitions")
        stage_fields = {f.name: f for f in stage.fields or []}
        self._check_fields(stage.fields or [], f"{path}.fields", "stage", self.workflow_fields)
        for ti, t in enumerate(transitions):
            tpath = f"{path}.transitions[{ti}]"
            if self._stage(t.to) is None:
                self.add(f"{tpath}.to", f"transition target {t.to!r} names no declared stage")
            self._expression(t.when, f"{tpath}.when", sites.TRANSITION_WHEN, stage)
        for name, value in (stage.editable or {}).items():
            if isinstance(value, str):
                self._expression(value, f"{path}.editable.{name}", sites.FIELD_EDITABLE, stage)
        resolvers: dict[str, set[str]] = {a.name: set() for a in activities}
        for ai, activity in enumerate(activities):
            apath = f"{path}.activities[{ai}]"
            self._check_activity(stage, activity, apath, stage_fields, effects)
            for action in activity.actions or []:
                for op in action.ops or []:
                    if isinstance(op, StatusSetOp) and op.status != "active":
                        resolvers.setdefault(op.activity, set()).add(action.name)
        for ai, activity in enumerate(activities):
            if not resolvers.get(activity.name):
                self.add(f"{path}.activities[{ai}]", f"activity {activity.name!r} has no action "
                         "that gives it a terminal status (done, skipped or failed)")

    def _check_activity(
        self,
        stage: Stage,
        activity: Activity,
        path: str,
        stage_fields: dict[str, FieldEntry],
        effects: list[tuple[str, str]],
    ) -> None:
        actions = activity.actions or []
        self._unique([a.name for a in actions], f"{path}.actions", "action")
        self._unique([r.name for r in activity.requirements or []], f"{path}.requirements",
                     "requirement")
        outer = {**self.workflow_fields, **stage_fields}
        self._check_fields(activity.fields or [], f"{path}.fields", "activity", outer)
        if activity.filter is not None:
            self._expression(activity.filter, f"{path}.filter", sites.ACTIVITY_FILTER, stage,
                             activity)
        for ri, requirement in enumerate(activity.requirements or []):
            self._expression(requirement.query, f"{path}.requirements[{ri}].query",
                             sites.REQUIREMENT, stage, activity)
        stage_activities = {a.name for a in stage.activities or []}
        for xi, action in enumerate(actions):
            self._check_action(stage, activity, action, f"{path}.actions[{xi}]",
                               stage_activities, effects)

    def _check_action(
        self,
        stage: Stage,
        activity: Activity,
        action: Action,
        path: str,
        stage_activities: set[str],
        effects: list[tuple[str, str]],
    ) -> None:
        triggered = action.cascade_fired
        if action.when is not None:
            self._expression(action.when, f"{path}.when", sites.TRIGGER_WHEN, stage, activity)
        if action.filter is not None:
            site = sites.TRIGGER_FILTER if triggered else sites.ACTION_FILTER
            self._expression(action.filter, f"{path}.filter", site, stage, activity)
        if triggered and action.params:
            self.add(f"{path}.params", "a cascade-fired action (one with 'when') takes no params")
        if action.roles is not None and not action.roles:
            self.add(f"{path}.roles", "roles must not be empty")
        elif action.roles is not None and not triggered:
            self.add(f"{path}.roles", "stored roles are only allowed on cascade-fired actions")
        params = [p.name for p in action.params or []]
        self._unique(params, f"{path}.params", "param")
        for oi, op in enumerate(action.ops or []):
            self._check_op(op, f"{path}.ops[{oi}]", stage, activity, set(params), triggered,
                           stage_activities)
        for ei, effect in enumerate(action.effects or []):
            epath = f"{path}.effects[{ei}]"
            effects.append((effect.name, f"{epath}.name"))
            site = sites.BINDINGS_CASCADE if triggered else sites.BINDINGS_CALLER
            for key, text in (effect.bindings or {}).items():
                self._expression(text, f"{epath}.bindings.{key}", site, stage, activity)
        if action.spawn is not None:
            spath = f"{path}.spawn"
            spawn = action.spawn
            self._expression(spawn.forEach, f"{spath}.forEach", sites.SPAWN_FOR_EACH, stage,
                             activity)
            for key, text in (spawn.with_ or {}).items():
                self._expression(text, f"{spath}.with.{key}", sites.SPAWN_WITH, stage, activity)
            for key, text in (spawn.context or {}).items():
                self._expression(text, f"{spath}.context.{key}", sites.SPAWN_CONTEXT, stage,
                                 activity)
            version = spawn.definition.version
            if isinstance(version, int) and version < 1:
                self.add(f"{spath}.definition.version", "a pinned version must be >= 1")
            for where, problem in budget_problems(spawn) + cohort_key_problems(spawn):
                self.add(f"{spath}.{where}", problem)
            for where, text, site in cohort_expressions(spawn):
                self._expression(text, f"{spath}.{where}", site, stage, activity)

    def _check_op(
        self,
        op: Op,
        path: str,
        stage: Stage,
        activity: Activity,
        params: set[str],
        triggered: bool,
        stage_activities: set[str],
    ) -> None:
        if isinstance(op, StatusSetOp):
            if op.activity not in stage_activities:
                self.add(f"{path}.activity", f"status.set targets {op.activity!r}, which is not "
                         f"an activity of stage {stage.name!r}")
            return
        entry = self._target(op.target, stage, activity)
        if entry is None:
            self.add(f"{path}.target", f"target {op.target.scope}.{op.target.field} names no "
                     "field this action can reach")
        elif isinstance(op, ARRAY_OPS) and entry.type not in ARRAY_TARGET_KINDS:
            self.add(f"{path}.target", f"{op.type} needs an array-kind field; "
                     f"{op.target.field!r} is {entry.type}")
        elif isinstance(op, IncOp | DecOp) and entry.type != "number":
            self.add(f"{path}.target", f"{op.type} needs a number field; "
                     f"{op.target.field!r} is {entry.type}")
        value = getattr(op, "value", None)
        if value is not None:
            self._check_value(value, f"{path}.value", stage, activity, params, triggered)
        where = getattr(op, "where", None)
        if isinstance(where, str):
            site = sites.WHERE_CASCADE if triggered else sites.WHERE_CALLER
            self._expression(where, f"{path}.where", site, stage, activity)

    def _check_value(
        self,
        value: ValueExpr,
        path: str,
        stage: Stage,
        activity: Activity,
        params: set[str],
        triggered: bool,
    ) -> None:
        if isinstance(value, ParamValue):
            if triggered:
                self.add(path, "a cascade-fired action has no params to read")
            elif value.param not in params:
                self.add(path, f"param {value.param!r} is not declared on this action")
        elif isinstance(value, FieldReadValue):
            ref = FieldRef(scope=value.scope, field=value.field)
            if self._target(ref, stage, activity) is None:
                self.add(path, f"fieldRead of {value.scope}.{value.field}, which is not declared")
        elif isinstance(value, ObjectValue):
            for key, inner in value.fields.items():
                self._check_value(inner, f"{path}.fields.{key}", stage, activity, params,
                                  triggered)

    def _target(self, ref: FieldRef, stage: Stage, activity: Activity) -> FieldEntry | None:
        pool = {
            "workflow": self.model.fields,
            "stage": stage.fields,
            "activity": activity.fields,
        }[ref.scope]
        for entry in pool or []:
            if entry.name == ref.field:
                return entry
        return None

    # ---- fields ----

    def _check_fields(
        self, entries: list[FieldEntry], path: str, scope: str, outer: dict[str, FieldEntry]
    ) -> None:
        self._unique([e.name for e in entries], path, "field")
        earlier: dict[str, FieldEntry] = dict(outer)
        subjects = 0
        for i, entry in enumerate(entries):
            fpath = f"{path}[{i}]"
            source = entry.initialValue
            if entry.required and (scope != "workflow" or source is None
                                   or source.type != "input"):
                self.add(f"{fpath}.required", "required is only allowed on workflow-scope fields "
                         "whose initialValue is {type: 'input'}")
            if entry.type == "subject":
                subjects += 1
                if scope != "workflow":
                    self.add(f"{fpath}.type", "a subject field must be at workflow scope")
                elif subjects > 1:
                    self.add(f"{fpath}.type", "a workflow declares at most one subject field")
            if source is not None and source.type == "input" and scope != "workflow":
                self.add(f"{fpath}.initialValue", "only workflow-scope fields take input")
            self._check_shape(entry, fpath)
            if isinstance(source, LiteralSource):
                problem = kind_problem(entry, source.value)
                if problem:
                    self.add(f"{fpath}.initialValue.value", problem)
            elif isinstance(source, FieldReadSource) and source.field not in earlier:
                self.add(f"{fpath}.initialValue", f"fieldRead of {source.field!r}, which is not "
                         "an earlier field")
            elif isinstance(source, QuerySource):
                site = sites.Site("initialValue.query", "stage" if scope != "workflow"
                                  else "workflow", lake=True)
                self._expression(source.query, f"{fpath}.initialValue.query", site, None)
            if isinstance(entry.editable, str):
                self._expression(entry.editable, f"{fpath}.editable", sites.FIELD_EDITABLE, None)
            earlier[entry.name] = entry

    def _check_shape(self, entry: Any, path: str) -> None:
        if entry.type == "object" and not entry.fields:
            self.add(f"{path}.fields", "an object field needs 'fields'")
        if entry.type == "array" and not entry.of:
            self.add(f"{path}.of", "an array field needs 'of'")
        for i, sub in enumerate(entry.fields or []):
            self._check_shape(sub, f"{path}.fields[{i}]")
        for i, sub in enumerate(entry.of or []):
            self._check_shape(sub, f"{path}.of[{i}]")

    def _check_predicates(self) -> None:
        for name, text in (self.model.predicates or {}).items():
            path = f"predicates.{name}"
            if name in sites.RESERVED:
                self.add(path, f"predicate {name!r} shadows the reserved variable ${name}")
            self._expression(text, path, sites.PREDICATE, None)

    # ---- expressions ----

    def _expression(
        self,
        text: str,
        path: str,
        site: sites.Site,
        stage: Stage | None,
        activity: Activity | None = None,
    ) -> None:
        for message in expression_problems(text, site, self._window(site, stage, activity),
                                           self.predicates):
            self.add(path, message)

    def _window(
        self, site: sites.Site, stage: Stage | None, activity: Activity | None
    ) -> set[str] | None:
        """Field names visible at ``site``; ``None`` when unknowable here (any is fine)."""
        if stage is None and site.window != "workflow":
            return None
        names = set(self.workflow_fields)
        if site.window in ("stage", "activity") and stage is not None:
            names |= {f.name for f in stage.fields or []}
        if site.window == "activity" and activity is not None:
            names |= {f.name for f in activity.fields or []}
        return names


def expression_problems(
    text: str, site: sites.Site, window: set[str] | None, predicates: set[str]
) -> Iterator[str]:
    """Every problem of one expression at one site."""
    if not text.strip():
        yield f"{site.name}: the expression is empty"
        return
    problem = expressions.syntax_problem(text)
    if problem is not None:
        where = f" at position {problem.position}" if problem.position is not None else ""
        yield f"{site.name}: GROQ syntax error{where}: {problem.message}"
        return
    if not site.lake and expressions.scans_lake(text):
        yield f"{site.name}: conditions run on the instance snapshot and may not scan the lake (*)"
    bound = set(site.bound) | (predicates if site.predicates else set())
    for variable in sorted(expressions.read_variables(text) - bound):
        yield f"{site.name}: reads ${variable}, which this site does not bind"
    if window is not None and "fields" in expressions.read_variables(text):
        for name in sorted(expressions.field_reads(text) - window):
            yield f"{site.name}: reads $fields.{name}, which this site does not see"
