"""Read definitions from JSON or YAML files.

A file holds one definition (an object), a batch (a list), or a batch object
``{"$schema": ..., "definitions": [...]}`` (a list cannot carry the
``$schema`` key editors read); all load as a list. The loader only parses the
file format: shape problems are left to deploy validation, which reports all
of them with paths.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from kinflow.errors import InvalidInput


def load_definitions(path: str | Path) -> list[Any]:
    """Definitions in ``path`` (``.json``, ``.yaml`` or ``.yml``), always as a list."""
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(f"cannot read {source}: {exc.strerror}", path=str(source)) from exc
    return parse_definitions(text, yaml_format=source.suffix.lower() in (".yaml", ".yml"))


def parse_definitions(text: str, *, yaml_format: bool = False) -> list[Any]:
    try:
        data = yaml.safe_load(text) if yaml_format else json.loads(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"not valid {'YAML' if yaml_format else 'JSON'}: {exc}") from exc
    return definitions_in(data)


def definitions_in(data: Any) -> list[Any]:
    """The definitions a parsed file holds, whichever of its three shapes it has."""
    if isinstance(data, list):
        return data
    if isinstance(data, dict) and "definitions" in data and "stages" not in data:
        batch = data["definitions"]
        return batch if isinstance(batch, list) else [batch]
    return [data]
