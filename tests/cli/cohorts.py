"""What the ``kinflow cohort`` tests share: a parent ``p`` started with its cohort spawned,
the options that reach the test server as an operator or an admin, and the printed table
read back."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .test_cli import instance_id, invoke


def through(server: str, role: str = "ops") -> tuple[str, ...]:
    """The options that send a command to the test server with ``role``'s token
    (``ops``: an operator, ``admin``: an admin)."""
    return ("--url", server, "--token", f"{role}-token-for-tests")


def start_cohort(tmp_path: Path, definitions: list[dict[str, Any]],
                 items: list[dict[str, Any]], *remote: str, admin: tuple[str, ...] = ()) -> str:
    """Deploy ``definitions`` (with ``admin``'s options when given, else ``remote``'s), start
    ``p`` with ``items`` and fire its ``go.go``, which spawns the cohort: the parent's id."""
    path = tmp_path / "definitions.json"
    path.write_text(json.dumps(definitions))
    assert invoke("deploy", str(path), *(admin or remote))[0] == 0
    status, output = invoke("start", "p", "--field", f"items={json.dumps(items)}", *remote)
    assert status == 0, output
    parent = instance_id(output)
    assert invoke("fire", parent, "go", "go", *remote)[0] == 0
    return parent


def named(count: int) -> list[dict[str, Any]]:
    """``count`` rows ``r0``, ``r1``, ...: the ``items`` to start ``p`` with."""
    return [{"name": f"r{i}"} for i in range(count)]


def rows_of(output: str) -> dict[str, tuple[str, str]]:
    """``rowKey -> (status, child id)`` from the printed table."""
    found = {}
    for line in output.splitlines():
        match = re.match(r"\s*(r\d)\s.*?\b(QUEUED|ACTIVE|DONE|ABORTED|CANCELLED)\b.*?"
                         r"(instance\.[0-9A-Za-z-]+)", line)
        if match:
            found[match.group(1)] = (match.group(2), match.group(3))
    return found
