"""README's table of field types is true: every example declaration deploys and its value starts.

The table is read from the README itself, so an example that stops working
(or a type that is renamed) fails here rather than in a new user's hands.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.api.conftest import data, error_code, gql

pytestmark = pytest.mark.lake

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
DEPLOY = "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) { warnings } }"


def table() -> list[tuple[str, dict[str, Any], Any]]:
    """(type, declaration, value) for each row of the field-types table."""
    start = README.index("<!-- field-types:")
    rows = []
    for line in README[start:].splitlines()[3:]:
        if not line.startswith("| `"):
            break
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        kind = cells[0].strip("`")
        rows.append((kind, json.loads(cells[1].strip("`")), json.loads(cells[2].strip("`"))))
    return rows


def definition(fields: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": "field-types", "title": "Every field type", "initialStage": "open",
        "fields": [{**f, "initialValue": {"type": "input"}} for f in fields],
        "stages": [{"name": "open", "activities": [{"name": "a", "actions": [
            {"name": "go", "status": "done"}]}], "transitions": [{"name": "t", "to": "end"}]},
                   {"name": "end"}],
    }  # fmt: skip


def test_every_field_type_example_deploys_and_starts(client: TestClient) -> None:
    rows = table()
    kinds = [kind for kind, _declaration, _value in rows]
    assert len(kinds) == len(set(kinds)) == 15, kinds
    assert all(declaration["type"] == kind for kind, declaration, _value in rows)
    data(gql(client, DEPLOY, {"d": [definition([d for _k, d, _v in rows])]}))
    data(gql(client, 'mutation { putDocument(document: {_id: "article-1", _type: "article"}) }'))
    values = {declaration["name"]: value for _kind, declaration, value in rows}
    started = data(gql(client, """mutation($f: JSON) { startInstance(definition: "field-types",
        fields: $f) { instance { fields } } }""", {"f": values}))  # fmt: skip
    stored = started["startInstance"]["instance"]["fields"]
    for kind, declaration, value in rows:
        assert stored[declaration["name"]] not in (None, []), (kind, stored)
        if kind in ("string", "number", "boolean", "date", "object", "array"):
            assert stored[declaration["name"]] == value, kind


def test_object_and_array_need_their_columns(client: TestClient) -> None:
    for bare in ({"name": "lines", "type": "array"}, {"name": "budget", "type": "object"}):
        refused = gql(client, DEPLOY, {"d": [definition([bare])]})
        assert error_code(refused) == "definition-invalid"
        wanted = "of" if bare["type"] == "array" else "fields"
        assert re.search(rf"needs '{wanted}'", json.dumps(refused["errors"])), refused
