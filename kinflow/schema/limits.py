"""Query safety limits: depth, tokens and aliases, on by default.

Strawberry's limiter extensions do the counting; they are passed as
factories (one instance per operation, never shared across requests). Their
errors are re-coded ``query-too-complex`` by ``kinflow.schema.errors``.
"""

from __future__ import annotations

from collections.abc import Callable

from strawberry.extensions import (
    MaxAliasesLimiter,
    MaxTokensLimiter,
    QueryDepthLimiter,
    SchemaExtension,
)

from kinflow.settings import Settings


def limit_extensions(settings: Settings) -> list[Callable[[], SchemaExtension]]:
    depth, tokens, aliases = (
        settings.max_query_depth, settings.max_query_tokens, settings.max_query_aliases
    )
    return [
        lambda: QueryDepthLimiter(max_depth=depth),
        lambda: MaxTokensLimiter(max_token_count=tokens),
        lambda: MaxAliasesLimiter(max_alias_count=aliases),
    ]
