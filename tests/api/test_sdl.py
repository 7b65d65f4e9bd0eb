"""schema.graphql at the repository root is the running schema, and keeps the contract.

The contract is ``tests/api/contract.txt``: every type, field, argument and enum value
the API promises, with its exact type. The schema may add to it, never drop or retype.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import graphql

from kinflow.schema import sdl

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = Path(__file__).with_name("contract.txt")
KINDS = {
    "type": graphql.GraphQLObjectType,
    "input": graphql.GraphQLInputObjectType,
    "enum": graphql.GraphQLEnumType,
}


@dataclass
class Promised:
    """One type of the contract: its kind and its member lines (``name(args): Type``)."""

    kind: str
    name: str
    members: list[str] = field(default_factory=list)


def read_contract(text: str) -> list[Promised]:
    promised: list[Promised] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("  "):
            promised[-1].members.append(line.strip())
        else:
            kind, name = line.split()
            promised.append(Promised(kind, name))
    return promised


def served_member(named: graphql.GraphQLNamedType, member: str) -> str | None:
    """The served line for the contract's member, in the contract's own form."""
    name = member.split("(")[0].split(":")[0]
    if isinstance(named, graphql.GraphQLEnumType):
        return name if name in named.values else None
    assert isinstance(named, graphql.GraphQLObjectType | graphql.GraphQLInputObjectType)
    found = named.fields.get(name)
    if found is None:
        return None
    if "(" not in member or not isinstance(found, graphql.GraphQLField):
        return f"{name}: {found.type}"
    wanted = member[member.index("(") + 1 : member.rindex(")")].split(", ")
    args = []
    for arg in wanted:
        arg_name = arg.split(":")[0]
        if arg_name in found.args:
            args.append(f"{arg_name}: {found.args[arg_name].type}")
    return f"{name}({', '.join(args)}): {found.type}"


def contract_breaches(schema_text: str, contract_text: str) -> list[str]:
    schema = graphql.build_schema(schema_text)
    breaches = []
    for promised in read_contract(contract_text):
        named = schema.type_map.get(promised.name)
        if not isinstance(named, KINDS[promised.kind]):
            breaches.append(f"{promised.kind} {promised.name} is not served")
            continue
        for member in promised.members:
            served = served_member(named, member)
            if served != member:
                breaches.append(f"{promised.name}.{member} is served as {served}")
    return breaches


def test_exported_sdl_matches_the_running_schema() -> None:
    exported = (ROOT / "schema.graphql").read_text()
    assert exported == sdl(), "schema.graphql is stale: run `python -m kinflow.schema`"


def test_the_contract_is_there_to_check() -> None:
    promised = read_contract(CONTRACT.read_text())
    assert len(promised) >= 20 and sum(len(p.members) for p in promised) >= 120


def test_every_contract_type_and_field_is_served() -> None:
    breaches = contract_breaches((ROOT / "schema.graphql").read_text(), CONTRACT.read_text())
    assert breaches == []


def test_a_dropped_or_retyped_field_breaks_the_contract() -> None:
    schema = (ROOT / "schema.graphql").read_text()
    at = schema.index("type InstanceConnection")
    retyped = schema[:at] + schema[at:].replace("totalCount: Int!", "totalCount: Int", 1)
    dropped = schema.replace("enum EditMode {\n  SET\n", "enum EditMode {\n", 1)
    assert retyped != schema and dropped != schema
    assert contract_breaches(retyped, CONTRACT.read_text()) == [
        "InstanceConnection.totalCount: Int! is served as totalCount: Int"]
    assert contract_breaches(dropped, CONTRACT.read_text()) == [
        "EditMode.SET is served as None"]
