"""``kinflow schema``: print the published JSON Schemas (for editors and CI checks)."""

from __future__ import annotations

import sys
from importlib import resources

import typer

schema_app = typer.Typer(no_args_is_help=True, help="Print a JSON Schema kinflow publishes.")


@schema_app.command("definition")
def definition() -> None:
    """The JSON Schema of definition files (JSON or YAML): one definition, a list, or
    {"$schema", "definitions"}. Point an editor at it, or a file's "$schema" key."""
    # the shipped file, read as text through the top package: importing kinflow.define
    # would load every model, and this should start at once
    text = resources.files("kinflow").joinpath("define", "definition.schema.json").read_text(
        encoding="utf-8")
    sys.stdout.write(text)
