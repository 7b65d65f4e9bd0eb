"""README's GraphQL snippets stay pasteable: each one validates against schema.graphql."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from graphql import build_schema, parse, validate

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
SNIPPETS = re.findall(r"```graphql\n(.*?)```", README, re.S)


def test_the_tours_have_snippets() -> None:
    assert "## Cohort control in five steps" in README
    assert len(SNIPPETS) >= 10


@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda s: s.strip().splitlines()[1].strip()[:40])
def test_each_snippet_validates_against_the_schema(snippet: str) -> None:
    schema = build_schema((ROOT / "schema.graphql").read_text())
    assert validate(schema, parse(snippet)) == []
