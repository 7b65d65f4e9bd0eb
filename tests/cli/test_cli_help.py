"""The CLI says what it means (help, --version, details, inspect labels)."""

from __future__ import annotations

import re

import pytest

from kinflow import __version__
from kinflow.cli.app import app

from .test_cli import EXAMPLES, instance_id, invoke, refused

COMMANDS = ["serve", "demo", "worker", "deploy", "start", "fire", "edit", "abort", "cancel", "tick",
            "inspect", "groq", "tail", "lake", "lake export", "lake import", "purge"]  # fmt: skip
NOISE = re.compile(r"<(?:bool|str|int|float|list\[\w+\]|Path)>|\{\w+\}")


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_has_no_type_placeholders(command: str) -> None:
    status, output = invoke(*command.split(), "--help")
    assert status == 0, output
    assert NOISE.search(output) is None, output


def test_usage_names_arguments_plainly() -> None:
    status, output = invoke("deploy", "--help")
    assert status == 0 and "deploy [OPTIONS] PATHS..." in output, output
    assert "--url" in output and "URL" in output


def test_version() -> None:
    status, output = invoke("--version")
    assert status == 0 and output.strip() == f"kinflow {__version__}", output
    assert app.info.help  # the group keeps its description


@pytest.mark.lake
def test_details_leave_out_unset_values(cli_env: str) -> None:
    output = refused(["start", "no-such-definition"], "definition-not-found")
    assert "None" not in output, output


@pytest.mark.lake
def test_inspect_labels_an_aborted_cohort_by_its_reason(cli_env: str) -> None:
    assert invoke("lake", "import", "production",
                  str(EXAMPLES / "content" / "articles.ndjson"))[0] == 0  # fmt: skip
    assert invoke("deploy", str(EXAMPLES / "definitions" / "article-review.json"))[0] == 0
    status, output = invoke("start", "article-review", "--field", "subject=article-1")
    review = instance_id(output)
    assert invoke("fire", review, "write", "submit")[0] == 0
    status, output = invoke("abort", review, "--reason", "withdrawn")
    assert status == 0, output
    status, tree = invoke("inspect", review)
    assert status == 0, tree
    print(tree)
    rows = [line for line in tree.splitlines() if "row " in line]
    assert len(rows) == 3, tree
    assert "(detached)" not in tree
    assert all("ABORTED" in r and "(aborted: parent instance aborted)" in r for r in rows), tree
