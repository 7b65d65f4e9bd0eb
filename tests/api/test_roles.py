"""The role table (kinflow/schema/roles.py): it covers every mutation of the schema,
docs/api.md's roles table says the same, and the server refuses by it."""

from __future__ import annotations

import re

import graphql
import pytest
from starlette.testclient import TestClient

from kinflow.auth import ROLES
from kinflow.schema import roles, sdl
from tests.api.conftest import gql
from tests.api.test_sdl import ROOT
from tests.reliability.test_security import ADMIN_ONLY
from tests.reliability.test_security import MUTATIONS as SWEEP


def schema_mutations() -> set[str]:
    mutation = graphql.build_schema(sdl()).mutation_type
    assert mutation is not None
    return set(mutation.fields)


def documented() -> dict[str, str]:
    """docs/api.md's roles table read as mutation -> least role."""
    text = (ROOT / "docs" / "api.md").read_text()
    table = text.split("| role | may |", 1)[1].split("\n\n", 1)[0]
    found: dict[str, str] = {}
    for role, may in re.findall(r"^\| `(\w+)` \| (.*) \|$", table, flags=re.M):
        for name in re.findall(r"`(\w+)`", may):
            assert name not in found, f"{name} is listed twice"
            found[name] = role
    return found


def test_every_mutation_has_a_role_and_only_mutations_do() -> None:
    assert set(roles.MUTATIONS) == schema_mutations()
    assert set(roles.MUTATIONS.values()) <= set(ROLES)
    assert set(SWEEP) == set(roles.MUTATIONS), "the security sweep misses a mutation"
    assert ADMIN_ONLY == {name for name, role in roles.MUTATIONS.items() if role == roles.ADMIN}


def test_the_docs_roles_table_is_the_codes() -> None:
    assert documented() == roles.MUTATIONS


def test_queries_and_subscriptions_need_only_a_token() -> None:
    assert roles.needed("cohort") == roles.needed("cohortChanged") == roles.VIEWER
    assert roles.needed("updateCohort") == roles.OPERATOR


@pytest.mark.lake
def test_a_refusal_names_the_role_the_table_gives(secured: TestClient) -> None:
    for name, field in SWEEP.items():
        weak = "op-token-for-tests" if roles.MUTATIONS[name] == roles.ADMIN else (
            "view-token-for-tests")
        body = gql(secured, f"mutation {{ {field} }}", token=weak)
        error = body["errors"][0]
        assert error["extensions"]["code"] == "forbidden", (name, body)
        details = error["extensions"]["details"]
        assert (details["operation"], details["role"]) == (name, roles.MUTATIONS[name])
