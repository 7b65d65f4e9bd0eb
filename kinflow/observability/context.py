"""The ids one piece of work carries: its operation, instance, root and definition.

Set by the hooks as a request or heartbeat item goes down the stack (each
task has its own copy), read by the JSON log formatter and put on spans. Only
ids and names: never a token, a field value or a handler's parameters.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Any

OPERATION: ContextVar[str | None] = ContextVar("kinflow_operation", default=None)
INSTANCE: ContextVar[str | None] = ContextVar("kinflow_instance", default=None)
ROOT: ContextVar[str | None] = ContextVar("kinflow_root", default=None)
DEFINITION: ContextVar[str | None] = ContextVar("kinflow_definition", default=None)

FIELDS = {"operation": OPERATION, "instance": INSTANCE, "root": ROOT, "definition": DEFINITION}


def current() -> dict[str, str]:
    """The ids set here now (only those that are set)."""
    found = {}
    for name, var in FIELDS.items():
        value = var.get()
        if value is not None:
            found[name] = value
    return found


def of_document(document: dict[str, Any]) -> tuple[str | None, str | None]:
    """An instance document's (root id, definition name)."""
    ancestors = document.get("ancestors")
    root: Any = document.get("_id")
    if isinstance(ancestors, list) and ancestors and isinstance(ancestors[0], dict):
        first = ancestors[0]
        root = first.get("id") or root
    definition = document.get("definition")
    return (str(root).split(":")[-1] if root is not None else None,
            definition if isinstance(definition, str) else None)


def enter_instance(instance_id: str) -> tuple[Token[str | None], ...]:
    return (INSTANCE.set(instance_id), ROOT.set(None), DEFINITION.set(None))


def leave_instance(tokens: tuple[Token[str | None], ...]) -> None:
    instance, root, definition = tokens
    DEFINITION.reset(definition)
    ROOT.reset(root)
    INSTANCE.reset(instance)
