"""``kinflow schema definition`` prints the shipped JSON Schema without importing the models."""

from __future__ import annotations

import json
import subprocess
import sys

from kinflow.define.schema import SCHEMA_FILE

from .test_cli import invoke

PROBE = """
import sys
from kinflow.cli import app
try:
    app(["schema", "definition"], prog_name="kinflow")
except SystemExit:
    pass
print(sorted(m for m in sys.modules if m.startswith("kinflow.define")), file=sys.stderr)
"""


def test_it_prints_the_schema_file() -> None:
    status, output = invoke("schema", "definition")
    assert status == 0, output
    assert output == SCHEMA_FILE.read_text()
    assert json.loads(output)["$defs"]["SpawnBlock"]["properties"]["forEach"]


def test_it_reads_the_file_rather_than_the_models() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=120, check=True)
    assert json.loads(done.stdout)["title"] == "kinflow workflow definition"
    assert done.stderr.strip().splitlines()[-1] == "[]"
