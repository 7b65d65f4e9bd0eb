"""Python authoring helpers that produce the same JSON as a definition file.

Each helper builds the authoring form of one node as a plain dict (keyword
arguments in snake_case become camelCase keys, ``None`` is left out), so a
definition written in Python and one loaded from JSON or YAML are the same
data. ``define_workflow`` expands the shorthand and returns the stored form,
which deploys unchanged; the other helpers return authoring nodes to nest.
Validation happens at deploy, where every problem is reported at once.
"""

from __future__ import annotations

from typing import Any

from kinflow.define.expand import expand_definition


def _camel(name: str) -> str:
    head, *rest = name.rstrip("_").split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _node(**keys: Any) -> dict[str, Any]:
    return {_camel(k): v for k, v in keys.items() if v is not None}


def define_field(name: str, type: str, **options: Any) -> dict[str, Any]:
    """A field entry, e.g. ``define_field("subject", "subject", required=True,
    initial_value={"type": "input"})``."""
    return _node(name=name, type=type, **options)


def define_transition(
    name: str, to: str, when: str | None = None, **options: Any
) -> dict[str, Any]:
    """An edge; without ``when`` it fires once every activity is done or skipped."""
    return _node(name=name, to=to, when=when, **options)


def define_action(name: str, **options: Any) -> dict[str, Any]:
    """An action; ``status="done"`` resolves its activity, ``when=...`` makes it cascade-fired."""
    return _node(name=name, **options)


def define_activity(
    name: str, actions: list[dict[str, Any]] | None = None, **options: Any
) -> dict[str, Any]:
    return _node(name=name, actions=actions, **options)


def define_stage(
    name: str,
    activities: list[dict[str, Any]] | None = None,
    transitions: list[dict[str, Any]] | None = None,
    **options: Any,
) -> dict[str, Any]:
    return _node(name=name, activities=activities, transitions=transitions, **options)


def define_workflow(
    name: str,
    *,
    title: str,
    initial_stage: str,
    stages: list[dict[str, Any]],
    fields: list[dict[str, Any]] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """The stored form of a whole definition (shorthand expanded)."""
    authored = _node(name=name, title=title, initial_stage=initial_stage, fields=fields,
                     stages=stages, **options)
    result: dict[str, Any] = expand_definition(authored)
    return result
