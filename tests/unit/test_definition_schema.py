"""The published JSON Schema of definitions: current, valid, strict, and every example fits it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from kinflow.core.deploy import validate_batch
from kinflow.define import load_definitions, parse_definitions
from kinflow.define.schema import SCHEMA_FILE, schema_text
from tests.engine.definitions import ARTICLE_REVIEW, TRANSLATE_ARTICLE

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "definitions").iterdir())


def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def raw(path: Path) -> Any:
    text = path.read_text()
    return yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else json.loads(text)


def test_the_committed_schema_is_the_generated_one() -> None:
    # python -m kinflow.define.schema --write refreshes it after a model changes
    assert SCHEMA_FILE.read_text() == schema_text()


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_fits_the_schema_and_names_it(path: Path) -> None:
    data = raw(path)
    assert list(validator().iter_errors(data)) == []
    items = data if isinstance(data, list) else data.get("definitions", [data])
    for item in items:
        assert (path.parent / item["$schema"]).resolve() == SCHEMA_FILE


def test_every_key_is_described() -> None:
    schema = json.loads(SCHEMA_FILE.read_text())
    bare = [f"{name}.{key}" for name, node in schema["$defs"].items()
            for key, prop in (node.get("properties") or {}).items()
            if "description" not in prop]
    assert bare == []
    assert [name for name, node in schema["$defs"].items() if "description" not in node] == []


def broken(change: str) -> dict[str, Any]:
    definition = copy.deepcopy(TRANSLATE_ARTICLE)
    stage = definition["stages"][0]
    if change == "misspelled key":
        stage["activites"] = stage.pop("activities")
    elif change == "unknown status":
        stage["activities"][0]["actions"][0]["status"] = "finished"
    elif change == "missing title":
        del definition["title"]
    elif change == "both budget keys":
        definition["stages"][0]["activities"][0]["actions"].append(
            {"name": "x", "when": "true", "spawn": {
                "forEach": "[]", "definition": {"name": "y"},
                "failureBudget": {"count": 1, "percent": 5}}})
    elif change == "window of zero":
        definition["stages"][0]["activities"][0]["actions"].append(
            {"name": "x", "when": "true", "spawn": {
                "forEach": "[]", "definition": {"name": "y"}, "maxActive": 0}})
    return definition


@pytest.mark.parametrize("change", ["misspelled key", "unknown status", "missing title",
                                    "both budget keys", "window of zero"])
def test_the_schema_refuses_what_deploy_refuses(change: str) -> None:
    definition = broken(change)
    assert not validator().is_valid(definition)
    with pytest.raises(Exception) as refused:
        validate_batch([definition])
    assert getattr(refused.value, "code", None) == "definition-invalid"


def test_the_shorthand_fits_as_authored() -> None:
    check = validator()
    for definition in (TRANSLATE_ARTICLE, ARTICLE_REVIEW):
        assert list(check.iter_errors(definition)) == []
        assert list(check.iter_errors([definition])) == []


def test_a_batch_object_and_schema_key_load_and_deploy_as_without(tmp_path: Path) -> None:
    named = {"$schema": "../definition.schema.json", **TRANSLATE_ARTICLE}
    batch = {"$schema": "x.json", "definitions": [named, ARTICLE_REVIEW]}
    (tmp_path / "b.json").write_text(json.dumps(batch))
    assert load_definitions(tmp_path / "b.json") == [named, ARTICLE_REVIEW]
    assert parse_definitions(yaml.safe_dump(batch), yaml_format=True) == [named, ARTICLE_REVIEW]
    assert validator().is_valid(batch)
    [with_key] = validate_batch([named])
    [without] = validate_batch([TRANSLATE_ARTICLE])
    assert with_key.stored == without.stored and with_key.digest == without.digest
