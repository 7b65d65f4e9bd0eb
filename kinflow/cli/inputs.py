"""Reading what users type: ``name=value`` pairs and definition files."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from kinflow.errors import InvalidInput

DEFINITION_SUFFIXES = (".json", ".yaml", ".yml")


def parse_value(text: str) -> Any:
    """JSON when it parses as JSON (numbers, booleans, objects), else the plain string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_pairs(pairs: list[str] | None, option: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for pair in pairs or []:
        name, sep, raw = pair.partition("=")
        if not sep or not name:
            raise InvalidInput(f"{option} expects name=value, got {pair!r}", option=option)
        values[name] = parse_value(raw)
    return values


def definition_files(paths: list[Path]) -> list[Path]:
    """The definition files named, with directories expanded (sorted, recursively)."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*") if p.suffix in DEFINITION_SUFFIXES))
        elif path.exists():
            found.append(path)
        else:
            raise InvalidInput(f"no such file or directory: {path}", path=str(path))
    return found


def load_definitions(paths: list[Path]) -> list[Any]:
    """Every definition in the files (one definition, a list, or {"definitions": [...]})."""
    from kinflow.define.loading import definitions_in  # deploying loads the models anyway

    definitions: list[Any] = []
    for path in definition_files(paths):
        text = read_text(path)
        try:
            data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (json.JSONDecodeError, yaml.YAMLError) as exc:
            raise InvalidInput(f"{path} is not valid {path.suffix[1:].upper()}: {exc}",
                               path=str(path)) from exc  # fmt: skip
        definitions.extend(definitions_in(data))
    if not definitions:
        raise InvalidInput("no definitions found", paths=[str(p) for p in paths])
    return definitions


def read_text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}", path=str(path)) from exc


def read_ndjson(path: Path) -> list[dict[str, Any]]:
    return [doc for _, doc in ndjson_lines(read_text(path).splitlines(), path)]


def ndjson_lines(lines: Iterable[str], path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each non-blank line's number and object; the first line that is not one is refused
    (``invalid-input`` with ``path`` and ``line``)."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as exc:
            # exc.msg alone may end mid-sentence ("Unterminated string starting at")
            reason = f"{exc.msg.removesuffix(' at')} at column {exc.colno}"
            raise InvalidInput(f"{path}:{number} is not JSON: {reason}", path=str(path),
                               line=number, column=exc.colno) from exc
        if not isinstance(doc, dict):
            raise InvalidInput(f"{path}:{number} is not an object", path=str(path), line=number)
        yield number, doc
