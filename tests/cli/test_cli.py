"""Every CLI command: its normal use and one refusal, run in-process on the test lake."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kinflow.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def refused(args: list[str], code: str) -> str:
    status, output = invoke(*args)
    assert status == 1, output
    assert f"error {code}" in output, output
    assert "Traceback" not in output
    return output


def instance_id(output: str) -> str:
    match = re.search(r"instance\.[0-9A-Z]+", output)
    assert match, output
    return match.group(0)


def test_deploy_prints_created_then_unchanged(cli_env: str) -> None:
    status, output = invoke("deploy", str(EXAMPLES / "definitions" / "article-review.json"))
    assert status == 0, output
    assert "created  translate-article v1" in output and "created  article-review v1" in output
    status, output = invoke("deploy", str(EXAMPLES / "definitions"))
    assert status == 0, output
    assert "unchanged  article-review v1" in output and "created  release v1" in output


def test_deploy_refuses_an_invalid_file_with_every_problem(cli_env: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "bad", "stages": []}))
    output = refused(["deploy", str(bad)], "definition-invalid")
    assert "title" in output and "initialStage" in output
    garbled = tmp_path / "garbled.yaml"
    garbled.write_text("name: [unclosed")
    refused(["deploy", str(garbled)], "invalid-input")
    refused(["deploy", str(tmp_path / "missing.json")], "invalid-input")


def test_start_fire_edit_tick_abort(cli_env: str) -> None:
    assert (
        invoke("lake", "import", "production", str(EXAMPLES / "content" / "articles.ndjson"))[0]
        == 0
    )
    assert invoke("deploy", str(EXAMPLES / "definitions" / "article-review.json"))[0] == 0
    status, output = invoke("start", "article-review", "--field", "subject=article-1")
    assert status == 0 and "stage drafting" in output, output
    instance = instance_id(output)

    status, output = invoke("tick", instance)
    assert status == 0 and "no change" in output, output
    refused(["fire", instance, "write", "nope"], "contract-violation")
    refused(["edit", instance, "no-such-field", "1"], "contract-violation")
    status, output = invoke("abort", instance, "--reason", "testing")
    assert status == 0 and "ABORTED" in output, output
    refused(["tick", "instance.missing"], "instance-not-found")
    refused(["abort", "instance.missing"], "instance-not-found")


def test_start_refusals(cli_env: str) -> None:
    refused(["start", "no-such-definition"], "definition-not-found")
    refused(["start", "x", "--field", "novalue"], "invalid-input")
    # the shape of a child's id (and its attempts') is the engine's, whatever the definition
    refused(["start", "x", "--id", "instance.c" + "0" * 24 + "-a2"], "instance-id-reserved")


def test_groq(cli_env: str) -> None:
    assert (
        invoke("lake", "import", "production", str(EXAMPLES / "content" / "articles.ndjson"))[0]
        == 0
    )
    status, output = invoke("groq", "*[_type == $t] | order(_id) [0].title", "--param", "t=article")
    assert status == 0 and "Fan-out workflows in practice" in output, output
    output = refused(["groq", "*[_type == "], "groq-syntax")
    assert "position" in output


def test_lake_status_export_import(cli_env: str, tmp_path: Path) -> None:
    status, output = invoke(
        "lake", "import", "production", str(EXAMPLES / "content" / "articles.ndjson")
    )
    assert status == 0, output
    assert output == "imported 5 documents into production (5 created, 0 replaced)\n", output
    status, output = invoke("lake", "status")
    assert status == 0 and "article" in output and cli_env in output, output
    target = tmp_path / "out.ndjson"
    status, output = invoke("lake", "export", "production", str(target))
    assert status == 0 and output == f"exported 5 documents from production to {target}\n"
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert sorted(d["_id"] for d in lines)[0] == "article-1"
    bad = tmp_path / "bad.ndjson"
    bad.write_text('{"_id": "x", "_type": "t"}\n{"_id": "y", "title": "unterminated}\n')
    output = refused(["lake", "import", "production", str(bad)], "invalid-input")
    assert "2 is not JSON: Unterminated string starting at column 23" in output, output


def test_an_export_carries_the_registry_rows_and_restores_them(
        cli_env: str, tmp_path: Path) -> None:
    """Rows are documents beside the dataset (core/cohort/chunks.py): a backup without them would
    restore parents that lost their children."""
    assert invoke("lake", "import", "production",
                  str(EXAMPLES / "content" / "articles.ndjson"))[0] == 0
    assert invoke("deploy", str(EXAMPLES / "definitions"))[0] == 0
    status, output = invoke("start", "release", "--field", "subject=release-2026-12")
    assert status == 0, output
    release = instance_id(output)
    target = tmp_path / "backup.ndjson"
    status, output = invoke("lake", "export", "production", str(target))
    assert status == 0, output
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    chunks = [d for d in lines if d.get("_side") == "rows"]
    # three reviews under the release, six translations under the reviews
    rows = {d["parent"]: len(d["rows"]) for d in chunks}
    assert rows[release] == 3 and sum(rows.values()) == 9
    status, output = invoke("lake", "import", "restored", str(target))
    assert status == 0 and f"imported {len(lines)} documents" in output, output
    status, copy = invoke("lake", "status")
    assert status == 0 and "restored.rows" in copy and "kinflow.registryChunk" in copy, copy


def test_unreachable_server_is_a_typed_refusal(cli_env: str) -> None:
    refused(["inspect", "instance.x", "--url", "http://127.0.0.1:9"], "server-unreachable")
    refused(
        ["deploy", str(EXAMPLES / "definitions"), "--url", "http://127.0.0.1:9"],
        "server-unreachable",
    )


def test_worker_once_and_a_bad_handler_module(cli_env: str, monkeypatch: pytest.MonkeyPatch
                                              ) -> None:  # fmt: skip
    status, output = invoke("worker", "--once")
    assert status == 0 and "one pass:" in output, output
    monkeypatch.setenv("KINFLOW_EFFECT_HANDLERS", "no_such_module_anywhere")
    refused(["worker", "--once"], "configuration-error")


def test_machine_translation_children_are_completed_by_the_python_handler(
    cli_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KINFLOW_EFFECT_HANDLERS", str(EXAMPLES / "handlers.py"))
    assert (
        invoke("lake", "import", "production", str(EXAMPLES / "content" / "articles.ndjson"))[0]
        == 0
    )
    assert invoke("deploy", str(EXAMPLES / "definitions"))[0] == 0
    status, output = invoke("start", "machine-translation-batch", "--field", "subject=article-2")
    assert status == 0, output
    parent = instance_id(output)
    status, output = invoke("worker", "--once")
    assert status == 0 and "2 effects" in output, output
    status, output = invoke("inspect", parent)
    assert status == 0, output
    assert "COMPLETED" in output.splitlines()[0]
    assert "2 children: 0 active, 2 done, 0 aborted" in output
    status, output = invoke(
        "groq",
        "*[_type == 'kinflow.instance' && definition == "
        "'machine-translate'].effectHistory[0].outputs.text",
    )
    assert "Hallo: Cohorts and settled gates [de]" in output, output


NOTES = {
    "name": "notes",
    "title": "Take notes",
    "initialStage": "open",
    "fields": [{"name": "note", "type": "string", "editable": True}],
    "stages": [
        {
            "name": "open",
            "activities": [{"name": "work", "actions": [{"name": "finish", "status": "done"}]}],
            "transitions": [{"name": "close", "to": "closed"}],
        },
        {"name": "closed"},
    ],
}


def test_fire_and_edit_normal_use(cli_env: str, tmp_path: Path) -> None:
    definition = tmp_path / "notes.json"
    definition.write_text(json.dumps(NOTES))
    assert invoke("deploy", str(definition))[0] == 0
    status, output = invoke("start", "notes")
    assert status == 0, output
    notes = instance_id(output)
    status, output = invoke("edit", notes, "note", "remember the milk")
    assert status == 0 and "edited" in output and "changed" in output, output
    assert (
        json.loads(invoke("groq", f"*[_id == '{notes}'][0].fields[name == 'note'][0].value")[1])
        == "remember the milk"
    )
    status, output = invoke("fire", notes, "work", "finish", "--key", "finish-1")
    assert status == 0 and "COMPLETED" in output and "stage closed" in output, output
    status, output = invoke("fire", notes, "work", "finish", "--key", "finish-1")
    assert status == 0 and "no change" in output, output  # a replay, not a second fire


def test_inspect_and_lake_refusals(cli_env: str, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    refused(["inspect", "instance.nope"], "instance-not-found")
    refused(["lake", "export", "bad dataset", str(tmp_path / "x.ndjson")], "gdr-invalid")
    monkeypatch.setenv("KINFLOW_MONGODB_URI", "mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=300")
    monkeypatch.setenv("KINFLOW_OPERATION_TIMEOUT", "1")
    refused(["lake", "status"], "lake-unavailable")
