"""``import kinflow.cli`` and ``kinflow --version``/``--help`` load none of the heavy parts
(the engine, the API schema, the lake and HTTP clients): commands import them when they run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support import free_port

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


def loaded_after(*args: str, env: dict[str, str] | None = None) -> list[str]:
    probe = PROBE % (HEAVY, HEAVY)
    done = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True,
                          text=True, timeout=120, check=True,
                          env={**os.environ, **(env or {})})
    return list(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("args", [(), ("--version",), ("--help",), ("lake", "--help")])
def test_the_cli_starts_without_the_heavy_parts(args: tuple[str, ...]) -> None:
    assert loaded_after(*args) == []


def test_a_command_through_a_server_loads_only_the_http_client() -> None:
    loaded = loaded_after("--url", f"http://127.0.0.1:{free_port()}", "inspect", "instance.x")
    assert "httpx" in loaded  # it ran, and found nothing listening
    assert not [m for m in loaded if m.split(".")[0] in ("strawberry", "pymongo")
                or m.startswith(("kinflow.engine", "kinflow.schema", "kinflow.storage"))]


def test_a_command_on_the_lake_loads_the_engine() -> None:
    # the checks above would pass vacuously if the probe could not see imports
    unreachable = {"KINFLOW_MONGODB_URI": "mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=200",
                   "KINFLOW_OPERATION_TIMEOUT": "1"}
    assert "kinflow.engine" in loaded_after("tick", "instance.x", env=unreachable)


def test_inspect_on_the_lake_loads_neither_the_http_client_nor_the_api_schema(
    cli_env: str,
) -> None:
    from .test_cli import EXAMPLES, instance_id, invoke

    assert invoke("deploy", str(EXAMPLES / "definitions" / "seat-booking.json"))[0] == 0
    status, output = invoke("start", "event-booking", "--field", 'seats=[{"seat": "A1"}]')
    assert status == 0, output
    loaded = loaded_after("inspect", instance_id(output))
    assert "kinflow.engine" in loaded and "pymongo" in loaded  # it read the lake
    assert not [m for m in loaded if m.split(".")[0] in ("httpx", "strawberry")
                or m.startswith("kinflow.schema")]
