"""``import kinflow.cli`` and ``kinflow --version``/``--help`` load none of the heavy parts
(the engine, the API schema, the lake and HTTP clients): commands import them when they run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("kinflow.engine", "kinflow.schema", "kinflow.storage", "kinflow.core", "strawberry",
         "pymongo", "httpx", "uvicorn", "pydantic_settings", "yaml")

PROBE = """
import json, sys
from kinflow.cli import app
args = sys.argv[1:]
if args:
    try:
        app(args, prog_name="kinflow")
    except SystemExit:
        pass
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {h.split(".")[0] for h in
    %r} and any(m == h or m.startswith(h + ".") for h in %r))), file=sys.stderr)
"""


def loaded_after(*args: str) -> list[str]:
    probe = PROBE % (HEAVY, HEAVY)
    done = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True,
                          text=True, timeout=120, check=True)
    return list(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("args", [(), ("--version",), ("--help",), ("lake", "--help")])
def test_the_cli_starts_without_the_heavy_parts(args: tuple[str, ...]) -> None:
    assert loaded_after(*args) == []


def test_the_probe_sees_a_command_that_needs_them() -> None:
    # the check above would pass vacuously if the probe could not see imports
    assert "kinflow.engine" in loaded_after("cohort", "instance.x", "a", "--status", "late")
