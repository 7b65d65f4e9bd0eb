"""The GraphQL API (docs/api.md): schema, resolvers, errors, limits, subscriptions.

``build_schema(settings)`` assembles the Strawberry schema with the safety
limits and error shaping configured; ``sdl()`` is the exported contract that
``schema.graphql`` at the repository root must equal.
"""

from __future__ import annotations

import logging
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.schema.config import StrawberryConfig
from strawberry.tools import merge_types

from kinflow.observability.operations import OperationWatch
from kinflow.schema.caching import caching_extensions
from kinflow.schema.documents import DocumentsMutation
from kinflow.schema.errors import ErrorShaping
from kinflow.schema.hooks import HookRunner
from kinflow.schema.input_hygiene import InputHygiene
from kinflow.schema.limits import limit_extensions
from kinflow.schema.mutations import Mutation
from kinflow.schema.parking import ParkingQuery
from kinflow.schema.purge import PurgeMutation
from kinflow.schema.queries import Query
from kinflow.schema.scalars import SCALAR_MAP
from kinflow.schema.subscriptions import Subscription
from kinflow.settings import Settings

log = logging.getLogger("kinflow.api")


class KinflowSchema(strawberry.Schema):
    """Strawberry's schema, minus its per-error traceback logging, running its
    extensions' hooks through ``HookRunner``.

    ``ErrorShaping`` logs the unexpected errors (with their error id); refusals
    are answers, not incidents, and are logged at debug level only.
    """

    def process_errors(self, errors: list[GraphQLError], execution_context: Any = None) -> None:
        for error in errors:
            log.debug("graphql error: %s", error.message)

    def create_extensions_runner(self, execution_context: Any,
                                 extensions: list[Any]) -> HookRunner:
        """The extensions' hooks, run without per-hook wrappers (``hooks.py``)."""
        return HookRunner(execution_context=execution_context, extensions=extensions)


def build_schema(settings: Settings | None = None) -> KinflowSchema:
    settings = settings or Settings()
    return KinflowSchema(
        query=merge_types("Query", (Query, ParkingQuery)),
        mutation=merge_types("Mutation", (Mutation, DocumentsMutation, PurgeMutation)),
        subscription=Subscription,
        extensions=[OperationWatch, *limit_extensions(settings), ErrorShaping, InputHygiene,
                    *caching_extensions()],
        config=StrawberryConfig(scalar_map=SCALAR_MAP),
    )


def sdl() -> str:
    """The schema's SDL as exported to ``schema.graphql``."""
    return build_schema().as_str() + "\n"
