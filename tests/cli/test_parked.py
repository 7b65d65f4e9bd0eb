"""``kinflow inspect`` marks an instance the heartbeat parked; ``kinflow tick`` un-parks it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.engine.definitions import simple

from .test_cli import instance_id, invoke, refused

pytestmark = pytest.mark.lake

LOOPS = simple("loops", [
    {"name": "start", "activities": [{"name": "go", "actions": [{"name": "go",
                                                                 "status": "done"}]}],
     "transitions": [{"name": "to-ping", "to": "ping"}]},
    {"name": "ping", "transitions": [{"name": "to-pong", "to": "pong"}]},
    {"name": "pong", "transitions": [{"name": "to-ping", "to": "ping"}]},
])


def test_inspect_shows_a_parked_instance_until_tick(cli_env: str, tmp_path: Path) -> None:
    path = tmp_path / "loops.json"
    path.write_text(json.dumps([LOOPS]))
    assert invoke("deploy", str(path))[0] == 0
    status, output = invoke("start", "loops")
    assert status == 0, output
    iid = instance_id(output)
    refused(["fire", iid, "go", "go"], "cascade-limit")
    status, output = invoke("worker", "--once")
    assert status == 0 and "1 parked" in output, output
    status, output = invoke("inspect", iid)
    assert status == 0 and "parked: cascade-limit until" in output, output
    status, output = invoke("worker", "--once")  # backing off: not tried again
    assert status == 0 and "0 parked" in output and "1 failed" not in output, output
    refused(["tick", iid], "cascade-limit")  # the tick un-parks it, and is refused the same way
    status, output = invoke("inspect", iid)
    assert status == 0 and "parked" not in output, output
