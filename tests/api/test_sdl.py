"""schema.graphql at the repository root is the running schema, and keeps the contract."""

from __future__ import annotations

import re
from pathlib import Path

from kinflow.schema import sdl

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = Path("/work/shared/design/GRAPHQL.md")


def test_exported_sdl_matches_the_running_schema() -> None:
    exported = (ROOT / "schema.graphql").read_text()
    assert exported == sdl(), "schema.graphql is stale: run `python -m kinflow.schema`"


def _fields(text: str) -> dict[str, set[str]]:
    """type/input/enum name -> its member names, from SDL-like text."""
    out: dict[str, set[str]] = {}
    for match in re.finditer(r"(?:type|input|enum)\s+(\w+)\s*\{(.*?)\}", text, re.S):
        body = re.sub(r'"""(.*?)"""|"[^"\n]*"|#[^\n]*', "", match[2], flags=re.S)
        names = set(re.findall(r"(?:^|[\s,])(\w+)\s*(?=[(:]|\s|$)", body))
        out[match[1]] = names
    return out


def test_every_contract_type_and_field_is_served() -> None:
    if not CONTRACT.exists():  # the design folder lives outside the repository
        return
    blocks = "\n".join(re.findall(r"```graphql\n(.*?)```", CONTRACT.read_text(), re.S))
    served = _fields(sdl())
    assert len(served) > 20
    for name, members in _fields(blocks).items():
        assert name in served, f"type {name} is missing"
        block = re.search(rf"(?:type|input|enum) {name} \{{(.*?)\}}", sdl(), re.S)
        assert block is not None
        words = set(re.findall(r"\w+", block[1]))
        missing = {m for m in members if m not in words}
        assert not missing, f"{name} lacks {sorted(missing)}"
