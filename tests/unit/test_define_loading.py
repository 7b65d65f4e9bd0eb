"""Definitions load from JSON and YAML files as the same data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kinflow.define import load_definitions
from kinflow.errors import InvalidInput
from tests.engine.definitions import ARTICLE_REVIEW, TRANSLATE_ARTICLE


def test_json_and_yaml_load_the_same_batch(tmp_path: Path) -> None:
    batch = [TRANSLATE_ARTICLE, ARTICLE_REVIEW]
    (tmp_path / "b.json").write_text(json.dumps(batch))
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(batch))
    (tmp_path / "one.yml").write_text(yaml.safe_dump(TRANSLATE_ARTICLE))
    assert load_definitions(tmp_path / "b.json") == batch
    assert load_definitions(tmp_path / "b.yaml") == batch
    assert load_definitions(tmp_path / "one.yml") == [TRANSLATE_ARTICLE]


def test_unreadable_files_are_typed(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(InvalidInput):
        load_definitions(tmp_path / "bad.json")
    with pytest.raises(InvalidInput):
        load_definitions(tmp_path / "missing.yaml")
