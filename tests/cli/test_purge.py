"""``kinflow purge --before DATE [--definition D] [--yes]``: a dry run unless --yes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.engine.retention_defs import family

from .test_cli import instance_id, invoke, refused

pytestmark = pytest.mark.lake
COUNT = "count(*[_type == 'kinflow.instance'])"


def _groq(query: str) -> object:
    status, output = invoke("groq", query)
    assert status == 0, output
    return json.loads(output)


def test_purge_is_a_dry_run_until_yes(cli_env: str, tmp_path: Path) -> None:
    definitions = tmp_path / "family.json"
    definitions.write_text(json.dumps(family()))
    assert invoke("deploy", str(definitions))[0] == 0
    status, output = invoke("start", "root")
    assert status == 0, output
    root = instance_id(output)
    kids = _groq("*[_type == 'kinflow.instance' && count(ancestors) > 0]"
                 "| order(count(ancestors) desc)._id")
    assert isinstance(kids, list) and len(kids) == 2
    for iid in [*kids, root]:
        status, output = invoke("fire", iid, "task", "finish")
        assert status == 0, output
    status, output = invoke("purge", "--before", "2999-01-01")
    assert status == 0, output
    assert "dry run: would purge 1 family (3 instances)" in output
    assert "kinflow lake export" in output
    assert _groq(COUNT) == 3
    status, output = invoke("purge", "--before", "2999-01-01", "--definition", "other", "--yes")
    assert status == 0 and "purged 0 families" in output, output
    status, output = invoke("purge", "--before", "2999-01-01T00:00:00Z", "--yes")
    assert status == 0 and "purged 1 family (3 instances)" in output, output
    assert _groq(COUNT) == 0


def test_purge_refuses_a_date_it_cannot_read(cli_env: str) -> None:
    output = refused(["purge", "--before", "last tuesday"], "invalid-input")
    assert "--before" in output
