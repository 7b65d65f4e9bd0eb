"""The one table of who may call which GraphQL field.

Roles nest (``viewer`` < ``operator`` < ``admin``, ``kinflow.http.tokens``): every
query and subscription needs only a token (``viewer``); each mutation needs
the role this table names for it. Resolvers ask ``require(info)`` rather
than naming a role themselves, so the table is the only place a field's role
is written, and docs/api.md's roles table is checked against it by a test.
"""

from __future__ import annotations

from kinflow.engine import Actor
from kinflow.http.tokens import ROLES
from kinflow.http.tokens import require as require_role
from kinflow.schema.context import KInfo

VIEWER, OPERATOR, ADMIN = ROLES

MUTATIONS: dict[str, str] = {
    "startInstance": OPERATOR,
    "fireAction": OPERATOR,
    "editField": OPERATOR,
    "completeEffect": OPERATOR,
    "abortInstance": OPERATOR,
    "cancelInstance": OPERATOR,
    "updateCohort": OPERATOR,
    "pauseCohort": OPERATOR,
    "resumeCohort": OPERATOR,
    "redriveCohort": OPERATOR,
    "fireCohort": OPERATOR,
    "abortCohort": OPERATOR,
    "cancelCohort": OPERATOR,
    "tick": OPERATOR,
    "putDocument": OPERATOR,
    "putDocuments": OPERATOR,
    "deleteDocument": OPERATOR,
    "deployDefinitions": ADMIN,
    "setStage": ADMIN,
    "resetActivity": ADMIN,
    "purgeInstances": ADMIN,
    "holdFamily": ADMIN,
    "releaseFamily": ADMIN,
}
"""Mutation field -> the least role that may call it."""

CREATE_DATASET = ADMIN
"""A ``putDocument(s)`` into a dataset that does not exist yet creates it only for this role."""


def needed(field: str) -> str:
    """The least role for a GraphQL field: a mutation's entry, else ``viewer``."""
    return MUTATIONS.get(field, VIEWER)


def require(info: KInfo) -> Actor:
    """The caller's actor if its roles allow the field being resolved, else ``forbidden``.
    A mutation missing from the table is a programming error, never let through."""
    field = info.field_name
    if info.path.typename == "Mutation" and field not in MUTATIONS:
        raise LookupError(f"mutation {field} has no entry in the role table")
    actor = info.context.actor
    require_role(actor, needed(field), field)
    return actor
