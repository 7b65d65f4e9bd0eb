"""The role table (kinflow/schema/roles.py): it covers every mutation of the schema,
docs/api.md's roles table says the same, and the server refuses by it."""

from __future__ import annotations

import re

import graphql
import pytest
from starlette.testclient import TestClient

from kinflow.http.tokens import ROLES
from kinflow.schema import roles, sdl
from tests.api.conftest import gql
from tests.api.test_sdl import ROOT
from tests.reliability.test_security import ADMIN_ONLY
from tests.reliability.test_security import MUTATIONS as SWEEP


def schema_mutations() -> set[str]:
    mutation = graphql.build_schema(sdl()).mutation_type
    assert mutation is not None
    return set(mutation.fields)


def documented(doc: str, header: str) -> dict[str, str]:
    """A doc's roles table read as mutation -> least role (the names in each role's
    "may" column, the first after the role; the viewer's row names queries)."""
    text = (ROOT / "docs" / doc).read_text()
    table = text.split(header, 1)[1].split("\n\n", 1)[0]
    found: dict[str, str] = {}
    for role, may in re.findall(r"^\| `(\w+)` \| ([^|]*) \|", table, flags=re.M):
        if role == roles.VIEWER:
            continue
        for name in re.findall(r"`(\w+)`", may):
            assert name not in found, f"{name} is listed twice"
            found[name] = role
    return found


def test_every_mutation_has_a_role_and_only_mutations_do() -> None:
    assert set(roles.MUTATIONS) == schema_mutations()
    assert set(roles.MUTATIONS.values()) <= set(ROLES)
    assert set(SWEEP) == set(roles.MUTATIONS), "the security sweep misses a mutation"
    assert ADMIN_ONLY == {name for name, role in roles.MUTATIONS.items() if role == roles.ADMIN}


def test_the_docs_roles_tables_are_the_codes() -> None:
    assert documented("api.md", "| role | may |") == roles.MUTATIONS
    assert documented("security.md", "| role | may | may not |") == roles.MUTATIONS


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
