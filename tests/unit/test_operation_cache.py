"""Operation texts are parsed and validated once per schema; invalid ones every time."""

from __future__ import annotations

from typing import Any

import pytest
import strawberry.schema.schema as strawberry_schema

from kinflow.schema import build_schema
from kinflow.settings import Settings


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = strawberry_schema.validate_document

    def counting(schema: Any, document: Any, rules: Any) -> Any:
        seen.append("validate")
        return real(schema, document, rules)

    monkeypatch.setattr(strawberry_schema, "validate_document", counting)
    return seen


async def test_a_clean_text_is_validated_once(validations: list[str]) -> None:
    schema = build_schema(Settings())
    for _ in range(3):
        result = await schema.execute("query Probe { __typename }")
        assert result.errors is None and result.data == {"__typename": "Query"}
    assert validations == ["validate"]


async def test_an_invalid_text_is_refused_every_time(validations: list[str]) -> None:
    schema = build_schema(Settings())
    for _ in range(2):
        result = await schema.execute("{ noSuchField }")
        assert result.errors
    assert validations == ["validate", "validate"]
