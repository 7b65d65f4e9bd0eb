"""Query safety limits: depth, tokens and aliases, on by default.

Strawberry's limiters do the counting; they are passed as factories (one
extension instance per operation, never shared across requests). The depth
and alias limiters' validation rules are built once per schema: each
limiter's constructor builds its rule class (about 20 µs, on every request
otherwise), and a rule class holds only its limit, so every operation's
``AddValidationRules`` shares them. Their errors are re-coded
``query-too-complex`` by ``kinflow.schema.errors``.
"""

from __future__ import annotations

from collections.abc import Callable

from strawberry.extensions import (
    AddValidationRules,
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
    rules = [*QueryDepthLimiter(max_depth=depth).validation_rules,
             *MaxAliasesLimiter(max_alias_count=aliases).validation_rules]
    return [
        lambda: MaxTokensLimiter(max_token_count=tokens),
        lambda: AddValidationRules(rules),
    ]
